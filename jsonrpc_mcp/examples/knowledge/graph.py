"""Walking the knowledge graph: neighbourhoods and shortest paths over triples (L7; pure functions).

Relations are walked in both directions (``a knows b`` connects ``b`` back to ``a``); a path is the list of
triple ids from the start node to the target, in walking order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence

from .models import Triple

__all__ = ("neighbourhood", "shortest_paths")


def neighbourhood(
    start: str, depth: int, edges: Callable[[Sequence[str], Collection[int]], list[Triple]], limit: int
) -> tuple[list[str], list[Triple], bool]:
    """Nodes and triples within ``depth`` hops of ``start`` (breadth first, at most ``limit`` triples).
    ``edges(nodes, known)`` gives the triples touching ``nodes`` other than those in ``known`` (ids), at least
    ``limit + 1`` of them when there are that many. The last value says whether the limit cut the walk short."""
    seen_nodes = {start}
    order = [start]
    found: dict[int, Triple] = {}
    frontier = [start]
    for _ in range(depth):
        if not frontier:
            break
        new: list[str] = []
        for triple in edges(frontier, found.keys()):
            if triple.id in found:
                continue
            if len(found) >= limit:
                return order, list(found.values()), True
            found[triple.id] = triple
            for node in (triple.subject, triple.object):
                if node not in seen_nodes:
                    seen_nodes.add(node)
                    order.append(node)
                    new.append(node)
        frontier = new
    return order, list(found.values()), False


def shortest_paths(start: str, target: str, triples: Sequence[Triple], depth: int, most: int = 5) -> list[list[int]]:
    """Up to ``most`` shortest paths (at most ``depth`` hops) from ``start`` to ``target`` over ``triples``."""
    if start == target:
        return []
    adjacent: dict[str, list[tuple[str, int]]] = {}
    for t in triples:
        adjacent.setdefault(t.subject, []).append((t.object, t.id))
        adjacent.setdefault(t.object, []).append((t.subject, t.id))
    paths: list[list[int]] = []
    queue: deque[tuple[str, list[int], frozenset[str]]] = deque([(start, [], frozenset({start}))])
    while queue:
        node, path, visited = queue.popleft()
        if paths and len(path) >= len(paths[0]):
            break  # breadth first: every shortest path has been found
        if len(path) >= depth:
            continue
        for nxt, triple_id in adjacent.get(node, ()):
            if nxt in visited:
                continue
            walked = [*path, triple_id]
            if nxt == target:
                paths.append(walked)
                if len(paths) >= most:
                    return paths
            else:
                queue.append((nxt, walked, visited | {nxt}))
    return paths
