"""ARCHITECTURE §3: the layer table, enforced on every module's imports (read with ``ast``, nothing executed).

Imports point down (or sideways, within one layer) only; ``jsonrpc/`` never imports ``mcp/``; layers L0-L2 are
sans-I/O and import no anyio (checked statically and by importing them in a subprocess where ``anyio`` cannot be
imported). Imports inside ``if TYPE_CHECKING:`` blocks are annotations only and may point to any layer. Imports
inside functions are real imports and count.

Three rules hold for every import, at the top, under ``TYPE_CHECKING`` or inside a function: a private module
(``_x``) is imported only from its own package; the protocol core (``jsonrpc/``, ``mcp/``) imports nothing of
``backends/``, ``otel`` or ``auth/`` (they plug into the protocols it defines); ``transports/`` imports nothing of
``backends/`` (a backend implements the transport's session store).

A new module must be given a layer in :data:`LAYERS` (or fall under a prefix in :data:`PREFIX_LAYERS`); an entry
that names no module fails too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "jsonrpc_mcp"
PACKAGE_DIR = ROOT / PACKAGE

#: Modules (relative to the package) and their layer, from ARCHITECTURE §3 (and each new module's docstring).
LAYERS: dict[str, int] = {
    # the sub-package namespaces themselves hold no code and import nothing of ours
    "jsonrpc": 0,
    "mcp": 0,
    # L0: standard library only
    "errors": 0,
    "addresses": 0,  # what kind of address a host is (loopback, private, public...): "L0" (its docstring)
    "version": 0,
    "jsonrpc.codes": 0,
    # L1: + msgspec
    "jsonrpc.wire": 1,
    # L2: sans-I/O
    "mcp.types": 2,
    "mcp._types_lazy": 2,  # the rarely used part of mcp.types, created on first use
    "mcp.methods": 2,
    "mcp.versions": 2,
    "mcp.request_state": 2,
    "mcp.pagination": 2,
    "mcp.uri_template": 2,
    "mcp.headers": 2,  # SEP-2243 header helpers: "L2: pure functions" (its docstring)
    "mcp.eras": 2,  # which era a request belongs to, and what a stateless request must carry
    "mcp.bus": 2,  # the events workers pass each other, a session's record, and what a server asks of the bus
    "mcp.principal": 2,  # the authenticated principal and the scope rule the core applies: "L2: no I/O"
    "mcp.compat": 2,  # results fitted to an older revision: "L2: pure functions" (its docstring)
    "mcp.pydantic_support": 2,  # pydantic models through msgspec hooks: "L2: pure functions" (its docstring)
    "auth.oauth_wire": 2,  # the OAuth client's documents, challenges, discovery URLs: sans-I/O (its docstring)
    "mcp.output_schemas": 2,  # the client's outputSchema checks: "L2: no I/O" (its docstring)
    "mcp.sampling": 2,  # the rules of a sampling conversation with tools: "L2: pure functions" (its docstring)
    "transports.framing": 2,
    "auth.principal": 2,  # the authenticated principal and the scope/audience rules: "L2: no I/O" (its docstring)
    # L3: the first anyio import
    "jsonrpc.dispatch": 3,
    "jsonrpc.concurrency": 3,
    "jsonrpc.streams": 3,
    "jsonrpc.workers": 3,  # plain functions on worker threads: a pool with a queue of its own
    "jsonrpc._reference": 3,  # the plain reference runner of the dispatcher, for the tests
    "mcp.progress": 3,  # progress paced per token (decision 104): anyio only
    # L4: typed requests over a MessageStream
    "mcp.context": 4,
    "mcp.session": 4,
    "mcp.middleware": 4,  # what a middleware sees of a message, and the chain
    "mcp.tracing": 4,  # whether tracing runs, and the hook a tracing implements (imports nothing of OpenTelemetry)
    "otel": 4,  # OpenTelemetry spans and metrics: a middleware of L4 messages (the otel extra)
    "mcp.groups": 4,
    # L5: the public API
    "mcp.server": 5,
    "mcp.client": 5,
    "mcp.result_cache": 5,  # the client's cache of results the server marked cacheable (a clock: not sans I/O)
    "mcp.tools": 5,
    "mcp.signature": 5,
    "mcp.extensions": 5,  # protocol extensions (SEP-2133): what the server and the client declare and add
    "mcp.task_state": 2,  # a task of the tasks extension as data, and the rules of its life: "L2: sans I/O"
    "mcp.task_store": 5,  # where tasks are kept: the store interface and the in-memory store
    "mcp.tasks": 5,  # the tasks extension, server side
    "mcp.task_client": 5,  # the tasks extension, client side
    "mcp.core_tasks": 5,  # 2025-11-25 core tasks, a face of the tasks extension
    # L7: on top of everything
    "": 7,  # the package __init__
    "__main__": 7,
    "cli": 7,
    "client": 7,  # Client: ClientSession (L5) plus the connect_* constructors of each transport (L6)
    "checker": 7,  # golden transcript replay (its docstring: L7), and its parts:
    "checker.__main__": 7,  # python -m jsonrpc_mcp.checker
    "checker.transcripts": 7,  # the transcript format
    "checker.frames": 7,  # what a frame is, masks, summaries
    "checker.comparison": 7,  # exact and semantic comparison
    "checker.channels": 7,  # stdio, in-process and Streamable HTTP targets
    "checker.probe": 7,  # what the server offers
    "checker.runner": 7,  # replaying sessions and exchanges
    "checker.grading": 7,  # a status per case
    "checker.report": 7,  # the report, as text and JSON
    "checker.cli": 7,  # jsonrpc-mcp check
    "checker.citations": 7,  # what a case cites, and the level that follows
    "checker.citation_table": 7,  # the cited sentences (generated)
    "middleware": 7,  # the middleware that ships (logging, rate limit, response size)
    "cli_client": 7,  # jsonrpc-mcp list and call
    "_cli_text": 7,  # what jsonrpc-mcp prints, and key=value arguments
    "cli_help": 7,  # the layout of jsonrpc-mcp's --help
    "extensions": 7,  # the public face of mcp.extensions
    "tasks": 7,  # the public face of the tasks extension (server side, stores)
    "icons": 7,  # fetching a server's icons the safe way (its docstring: L7; httpx, the OAuth client's address check)
}
#: Everything under these prefixes (after the exact table above).
PREFIX_LAYERS: list[tuple[str, int]] = [
    ("transports", 6),
    ("auth", 6),  # verifiers and the protected-resource policy: network (httpx), JOSE, HTTP
    ("backends", 6),  # what several workers share (Redis): network
    ("storage", 6),  # stores that keep state in files or services (the SQLite task store)
    ("presentation", 7),
    ("examples", 7),
    ("apps", 7),  # MCP Apps views (io.modelcontextprotocol/ui): on the server API
    ("skills", 7),  # skills (SEP-2640): on the server and client APIs
]
SANS_IO = 2  # L0 to L2: no anyio
#: The protocol core, and what plugs into it (never imported by it, in any form).
CORE: tuple[str, ...] = ("jsonrpc", "mcp")
PLUG_INS: tuple[str, ...] = ("backends", "otel", "auth")
#: What the transports define for a backend to implement (``transports.session_store``): they import none.
BACKENDS: tuple[str, ...] = ("backends",)

#: Known violations of the table: module -> why the test is expected to fail (strict: fixing it turns them red).
KNOWN_UPWARD: dict[str, str] = {}


@dataclass(frozen=True)
class Import:
    target: str  # relative module name ("" is the package), or an absolute third-party name with a leading "!"
    line: int
    type_checking: bool


def layer_of(module: str) -> int | None:
    if module in LAYERS:
        return LAYERS[module]
    for prefix, layer in PREFIX_LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by name relative to it ("" for the package itself)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str) -> str:
    """The longest known module that ``name`` (relative) denotes or sits in."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    package_parts = module.split(".") if module else []
    if not is_package:
        package_parts = package_parts[:-1]
    found: list[Import] = []

    def record(absolute: str, line: int, tc: bool) -> None:
        if absolute == PACKAGE or absolute.startswith(PACKAGE + "."):
            found.append(Import(_resolve(absolute[len(PACKAGE) + 1 :]), line, tc))
        else:
            found.append(Import("!" + absolute, line, tc))

    def visit(node: ast.AST, tc: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, tc)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                record(alias.name, node.lineno, tc)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)] if node.level > 1 else package_parts
                if node.level - 1 > len(package_parts):
                    raise AssertionError(f"{module}: relative import beyond the package at line {node.lineno}")
                absolute = ".".join([PACKAGE, *base, *([node.module] if node.module else [])])
            else:
                absolute = node.module or ""
            for alias in node.names:
                candidate = f"{absolute}.{alias.name}"
                inner = candidate[len(PACKAGE) + 1 :] if candidate.startswith(PACKAGE + ".") else None
                record(candidate if inner is not None and inner in modules() else absolute, node.lineno, tc)
        for child in ast.iter_child_nodes(node):
            visit(child, tc)

    visit(tree, False)
    return tuple(found)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def package_of(module: str) -> str:
    """The package a module is in ("" for the package's top level); a package is in itself."""
    return module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]


def private_owner(target: str) -> str | None:
    """The package whose private module ``target`` is (``"transports"`` for ``transports._http_io``, ``""`` for
    ``_version``), or ``None`` for a public module."""
    parts = target.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def is_foreign_private(importer: str, target: str) -> bool:
    """Whether ``importer`` reaches into another package's private module (its own package's, and those of the
    packages it is inside, are its own; the top level's are only the top level's)."""
    owner = private_owner(target)
    if owner is None:
        return False
    mine = package_of(importer) if importer in modules() else importer.rpartition(".")[0]
    return mine != owner and not (owner and mine.startswith(owner + "."))


def foreign_private_imports(module: str) -> list[str]:
    return [
        f"{module} line {imp.line} imports {imp.target}, a private module of another package"
        for imp in imports_of(module)
        if not imp.target.startswith("!") and is_foreign_private(module, imp.target)
    ]


def plug_in_imports(module: str) -> list[str]:
    if not _within(module, CORE):
        return []
    return [
        f"{module} line {imp.line} imports {imp.target}{' (TYPE_CHECKING)' if imp.type_checking else ''}"
        for imp in imports_of(module)
        if not imp.target.startswith("!") and (_within(imp.target, PLUG_INS) or imp.target == "")
    ]


def backend_imports(module: str) -> list[str]:
    if not _within(module, ("transports",)):
        return []
    return [
        f"{module} line {imp.line} imports {imp.target}{' (TYPE_CHECKING)' if imp.type_checking else ''}"
        for imp in imports_of(module)
        if not imp.target.startswith("!") and _within(imp.target, BACKENDS)
    ]


def upward_imports(module: str) -> list[str]:
    own = layer_of(module)
    assert own is not None
    problems = []
    for imp in imports_of(module):
        if imp.type_checking or imp.target.startswith("!"):
            continue
        target_layer = layer_of(imp.target)
        assert target_layer is not None, f"{imp.target} has no layer"
        if target_layer > own:
            problems.append(f"{module} (L{own}) line {imp.line} imports {imp.target or PACKAGE} (L{target_layer})")
    return problems


def test_the_import_walker_sees_what_it_should() -> None:
    """The walker itself: relative imports resolve to modules, TYPE_CHECKING and lazy imports are told apart."""
    server = {i.target: i for i in imports_of("mcp.server") if not i.target.startswith("!")}
    assert {"errors", "jsonrpc.dispatch", "mcp.types", "mcp.session"} <= set(server)
    client = [i for i in imports_of("client") if i.target.startswith("transports.")]
    assert client and not all(i.type_checking for i in client)  # lazy, but real
    stdio = [i for i in imports_of("transports.stdio") if i.target == "mcp.server"]
    assert stdio and all(i.type_checking for i in stdio)
    assert "!anyio" in {i.target for i in imports_of("jsonrpc.dispatch")}


def test_every_module_has_a_layer() -> None:
    unplaced = [name or "(package)" for name in modules() if layer_of(name) is None]
    assert not unplaced, f"give these modules a layer in tests/test_layers.py (ARCHITECTURE §3): {unplaced}"


def test_every_entry_of_the_table_names_a_module() -> None:
    stale = [name for name in (*LAYERS, *KNOWN_UPWARD) if name not in modules()]
    stale += [prefix for prefix, _ in PREFIX_LAYERS if not any(_within(name, (prefix,)) for name in modules())]
    assert stale == [], f"tests/test_layers.py names modules that do not exist: {stale}"


def test_no_module_imports_another_packages_private_module() -> None:
    offenders = [problem for name in modules() for problem in foreign_private_imports(name)]
    assert offenders == []


def test_the_core_imports_nothing_that_plugs_into_it() -> None:
    """Not at the top, not under ``TYPE_CHECKING``, not inside a function: the core defines the protocols it needs
    (the bus, the task store, the tracing hook, the principal), and ``backends/``, ``otel`` and ``auth/`` meet
    them. (Nor the package's ``__init__``, which imports everything.)"""
    offenders = [problem for name in modules() for problem in plug_in_imports(name)]
    assert offenders == []


def test_the_transports_import_no_backend() -> None:
    """The HTTP app defines what it asks of a shared backend (``transports.session_store``) and a backend given as
    a URL comes from the opener the package gives it: ``backends/`` implements the transport's protocol, never the
    other way round."""
    offenders = [problem for name in modules() for problem in backend_imports(name)]
    assert offenders == []


def test_the_rules_would_catch_what_they_forbid() -> None:
    """The two rules' predicates on the imports they exist for (so a green result above means something)."""
    assert is_foreign_private("auth.resource", "transports._http_io")
    assert is_foreign_private("backends.redis", "transports._http_session_table")
    assert is_foreign_private("transports.http_asgi", "jsonrpc._concurrency")
    assert is_foreign_private("checker.cli", "_cli_help")
    assert is_foreign_private("mcp.client", "_version")
    assert not is_foreign_private("transports.http_asgi", "transports._http_io")
    assert not is_foreign_private("cli", "_cli_text")
    assert not is_foreign_private("mcp.types", "mcp._types_lazy")
    assert not is_foreign_private("auth.resource", "transports.asgi")
    assert _within("backends.redis", PLUG_INS) and _within("otel", PLUG_INS) and _within("auth.principal", PLUG_INS)
    assert _within("mcp.server", CORE) and _within("jsonrpc.dispatch", CORE) and not _within("transports.stdio", CORE)
    assert _within("backends.redis", BACKENDS) and not _within("transports.session_store", BACKENDS)


def _module_params() -> list[object]:
    params: list[object] = []
    for name in modules():
        marks = []
        if name in KNOWN_UPWARD:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_UPWARD[name]))
        params.append(pytest.param(name, id=name or "(package)", marks=marks))
    return params


@pytest.mark.parametrize("module", _module_params())
def test_imports_point_down(module: str) -> None:
    if layer_of(module) is None:
        pytest.skip("no layer (see test_every_module_has_a_layer)")
    assert upward_imports(module) == []


def test_jsonrpc_never_imports_mcp() -> None:
    offenders = [
        f"{name} line {imp.line} imports {imp.target}"
        for name in modules()
        if name == "jsonrpc" or name.startswith("jsonrpc.")
        for imp in imports_of(name)
        if not imp.type_checking and (imp.target == "mcp" or imp.target.startswith("mcp.") or imp.target == "")
    ]
    assert offenders == []


def sans_io_modules() -> list[str]:
    return sorted(name for name in modules() if (layer := layer_of(name)) is not None and layer <= SANS_IO)


def test_sans_io_layers_import_no_anyio_statically() -> None:
    offenders = [
        f"{name} line {imp.line} imports {imp.target[1:]}"
        for name in sans_io_modules()
        for imp in imports_of(name)
        if not imp.type_checking
        and (imp.target in ("!anyio", "!trio", "!asyncio", "!socket") or imp.target.startswith("!anyio."))
    ]
    assert offenders == []


IMPORT_WITHOUT_ANYIO = """
import importlib, sys, types
sys.modules["anyio"] = None  # any import of anyio now raises ImportError
package = types.ModuleType({package!r})
package.__path__ = [{path!r}]  # the real package __init__ (L7) imports everything; L0-L2 must not need it
sys.modules[{package!r}] = package
for name in {names!r}:
    importlib.import_module({package!r} + "." + name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("anyio", "trio"))
assert loaded == ["anyio"], loaded
print("ok", len({names!r}))
"""


def test_sans_io_layers_import_without_anyio() -> None:
    names = [name for name in sans_io_modules() if name]
    assert {"errors", "jsonrpc.wire", "mcp.types", "transports.framing"} <= set(names)
    code = IMPORT_WITHOUT_ANYIO.format(package=PACKAGE, path=str(PACKAGE_DIR), names=names)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ok {len(names)}"


def test_the_subprocess_check_would_catch_anyio() -> None:
    """The same harness fails for a module that does need anyio (so a green result above means something)."""
    code = IMPORT_WITHOUT_ANYIO.format(package=PACKAGE, path=str(PACKAGE_DIR), names=["jsonrpc.dispatch"])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode != 0 and "anyio" in proc.stderr
