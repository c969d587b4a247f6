"""``jsonrpc_mcp.checker`` and ``jsonrpc-mcp check``: the transcript format, both comparison modes, the runner
against our own server (in process, over stdio, over Streamable HTTP), and against the official SDK (interop)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT

from jsonrpc_mcp.checker import (
    Exchange,
    HttpTarget,
    Observation,
    Offer,
    ServerTarget,
    Session,
    StdioTarget,
    Timing,
    TranscriptError,
    apply_masks,
    compare,
    format_report,
    frame_key,
    judge,
    load_transcripts,
    observe,
    parse_transcript,
    report_json,
    rewrite,
    run_check,
    summarize,
)
from jsonrpc_mcp.checker.comparison import (
    DEFAULT_IGNORE,
    NULL_ID,
    SEPARATE_REPLIES,
    WRONG_CODE,
    Mismatch,
    mismatch,
)

sys.path.insert(0, str(ROOT / "conformance"))
from everything_server import create_server

TRANSCRIPTS = ROOT / "jsonrpc_mcp" / "transcripts"
EVERYTHING = [sys.executable, str(ROOT / "conformance" / "everything_server.py")]
CLI = [sys.executable, "-m", "jsonrpc_mcp"]

SAMPLE = """\
# rule: pings are answered
# spec: basic/utilities/ping
# revision: all
# needs: -

=== session: initialize 2025-11-25

--- case: ping
# rule: ping answers {}
>>> {"jsonrpc":"2.0","id":1,"method":"ping"}
<<< {"jsonrpc":"2.0","id":1,"result":{}}

--- case: note
# rule: a notification gets nothing
# level: choice
>>> {"jsonrpc":"2.0","method":"x"}
<<< (silence)

=== session: stateless 2026-07-28 {"sampling":{}}

--- case: two-steps
# rule: two exchanges in one case
# needs: tool:t
# transport: stdio
>>>esc {"a":"\\xff"}
<<< {"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}
>>> {"jsonrpc":"2.0","id":$SERVER_REQUEST_ID,"result":{}}
<<< {"jsonrpc":"2.0","id":2}
"""

#: The one case our everything-server skips: it is for a server without the tasks capability, which ours declares
#: at 2025-11-25 (the revision the checker's offer is learned at).
TASKS_SKIP = ("unknown-methods", "tasks-not-advertised", "skip", "the server advertises the tasks capability")


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample.txt"
    path.write_text(SAMPLE, encoding="utf-8")
    return path


# --- the format ---------------------------------------------------------------------------------------------


def test_parse_the_format(sample: Path) -> None:
    t = parse_transcript(sample)
    assert (t.name, t.rule, t.spec, t.revision, t.needs) == (
        "sample",
        "pings are answered",
        ["basic/utilities/ping"],
        "all",
        [],
    )
    first, second = t.sessions
    assert (first.kind, first.revision, first.capabilities) == ("initialize", "2025-11-25", {})
    assert (second.kind, second.revision, second.capabilities) == ("stateless", "2026-07-28", {"sampling": {}})
    ping, note = first.cases
    assert ping.exchanges[0].send == [b'{"jsonrpc":"2.0","id":1,"method":"ping"}']
    assert ping.exchanges[0].expect == [b'{"jsonrpc":"2.0","id":1,"result":{}}']
    assert (ping.level, note.level, note.exchanges[0].expect) == ("must", "choice", [])
    (steps,) = second.cases
    assert len(steps.exchanges) == 2 and steps.needs == ["tool:t"] and steps.transports == ["stdio"]
    assert steps.exchanges[0].send == [b'{"a":"\xff"}']  # >>>esc: \xNN is a raw byte


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        (SAMPLE.replace("# rule: pings are answered\n", ""), "'# rule:'"),
        (SAMPLE.replace("=== session: initialize 2025-11-25", "=== session: initialize 2026-07-28"), "speak one of"),
        (SAMPLE.replace("--- case: note", "--- case: ping"), "unique"),
        (SAMPLE.replace("<<< (silence)\n", ""), "without '<<<'"),
        (SAMPLE.replace("# level: choice", "# level: maybe"), "level must be"),
        (SAMPLE.replace("# rule: ping answers {}", "# bogus: x"), "unknown case directive"),
        (SAMPLE.replace("<<< (silence)", "<<< (silence)\n<<< {}"), "only expected line"),
        (SAMPLE + "\nstray text\n", "unexpected line"),
        (SAMPLE.replace("# transport: stdio", "# transport: pigeon"), "transport is"),
    ],
)
def test_format_errors_are_reported(tmp_path: Path, broken: str, complaint: str) -> None:
    path = tmp_path / "broken.txt"
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(TranscriptError, match=complaint):
        parse_transcript(path)


def test_every_shipped_transcript_parses_and_says_what_it_pins() -> None:
    files = load_transcripts(TRANSCRIPTS)
    assert len(files) >= 14
    names = [c.name for t in files for _, c in t.cases()]
    assert len(names) >= 150
    for t in files:
        assert t.rule and t.spec and t.revision
        for _, case in t.cases():
            assert case.rule, (t.name, case.name)


def test_rewrite_replaces_only_expectations(sample: Path) -> None:
    t = parse_transcript(sample)
    observed = {
        "ping": Observation([[b'{"jsonrpc":"2.0","id":1,"result":{"x":1}}']]),
        "note": Observation([[b'{"late":true}', b'{"more":1}']]),
        "two-steps": Observation([[], [b'{"y":2}']]),
    }
    text = rewrite(t, observed, keep={"two-steps"})
    again = parse_transcript(sample, text)
    ping, note = again.sessions[0].cases
    assert ping.exchanges[0].expect == [b'{"jsonrpc":"2.0","id":1,"result":{"x":1}}']
    assert note.exchanges[0].expect == [b'{"late":true}', b'{"more":1}']
    assert again.sessions[1].cases[0].exchanges[1].expect == [b'{"jsonrpc":"2.0","id":2}']  # kept
    assert text.count("# rule:") == SAMPLE.count("# rule:")
    silenced = rewrite(t, {"ping": Observation([[]])})
    assert parse_transcript(sample, silenced).sessions[0].cases[0].exchanges[0].expect == []
    assert "<<< (silence)" in silenced


# --- comparison ---------------------------------------------------------------------------------------------

ERR = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: x","data":{"uri":"a"}}}'


def test_exact_mode_is_bytes() -> None:
    assert compare([ERR], [ERR], "exact") is None
    assert compare([ERR], [ERR.replace(b"-32602", b"-32601")], "exact") is not None
    assert compare([], [ERR], "exact") == "expected silence; got error -32602 (id 3)"
    assert compare([ERR], [ERR + b" "], "exact") is not None


def test_semantic_mode_ignores_message_and_data_unless_asked() -> None:
    other = b'{"id":3,"jsonrpc":"2.0","error":{"message":"nope","code":-32602,"data":{"uri":"b"}}}'
    assert compare([ERR], [other], "semantic") is None
    problem = compare([ERR], [other], "semantic", compare_paths=["error.data.uri"])
    assert problem == 'error.data.uri: expected "a", got "b"'
    missing = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"m"}}'
    assert compare([ERR], [missing], "semantic", compare_paths=["error.data.uri"]) == (
        'error.data is missing (expected {"uri": "a"})'
    )


@pytest.mark.parametrize(
    ("got", "why"),
    [
        (b'{"jsonrpc":"2.0","id":"3","error":{"code":-32602,"message":"m"}}', 'expected id 3, got "3"'),
        (b'{"jsonrpc":"2.0","id":3.0,"error":{"code":-32602,"message":"m"}}', "expected id 3, got 3.0"),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"m"}}', "expected error -32602, got error -32601"),
        (b'{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[]}}', "got result isError (id 3)"),
        (b'{"jsonrpc":"1.0","id":3,"error":{"code":-32602,"message":"m"}}', '"jsonrpc" is "1.0"'),
        (b"not json", "not JSON"),
    ],
)
def test_semantic_mode_keeps_what_matters(got: bytes, why: str) -> None:
    problem = compare([ERR], [got], "semantic")
    assert problem is not None and why in problem


def test_semantic_null_id_is_a_choice_not_a_missing_id() -> None:
    """JSON-RPC 2.0 asks for "id": null where the id cannot be read; we omit the key (decision 2): a DIFF."""
    parse_error = b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}'
    with_null = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    reason = 'the reply has "id": null (JSON-RPC 2.0 asks for it; MCP schemas omit "id")'
    assert compare([parse_error], [with_null], "semantic") == reason
    assert mismatch([parse_error], [with_null], "semantic") == Mismatch(reason, NULL_ID)
    with_id = with_null.replace(b'"id":null', b'"id":3')
    found = mismatch([parse_error], [with_id], "semantic")  # a real difference is no choice
    assert found == Mismatch("expected no id, got id 3")
    assert compare([parse_error], [with_null], "exact") is not None


def test_a_wrong_error_code_is_a_warning_and_silence_a_failure() -> None:
    """JSON-RPC 2.0's table of codes has no keyword (decision 7g): another code is graded WARN, never FAIL; an
    answer owed and not given (silence, a result) is still a plain mismatch."""
    invalid = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}'
    internal = invalid.replace(b"-32602", b"-32603")
    found = mismatch([invalid], [internal], "semantic")
    assert found is not None and found.cites == WRONG_CODE and "expected error -32602, got error -32603" in found.reason
    assert mismatch([invalid], [], "semantic") == Mismatch("expected error -32602 (id 1); got silence")
    result = mismatch([invalid], [b'{"jsonrpc":"2.0","id":1,"result":{}}'], "semantic")
    assert result is not None and result.cites == ()
    both = mismatch(
        [b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}'],
        [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}'],
        "semantic",
    )
    assert both is not None and both.cites == WRONG_CODE  # the WARN outweighs the DIFF


def test_a_null_id_for_a_readable_one_is_a_choice_and_separate_batch_replies_a_warning() -> None:
    """JSON-RPC 2.0 lets an Invalid Request be answered with "id": null; a 2025-03-26 stream may carry a batch's
    replies one by one (JSON-RPC 2.0's "should respond with an Array" is lowercase)."""
    invalid = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request"}}'
    found = mismatch([invalid], [invalid.replace(b'"id":7', b'"id":null')], "semantic")
    assert found is not None and found.cites == NULL_ID and "not the readable id 7" in found.reason
    result = b'{"jsonrpc":"2.0","id":7,"result":{}}'
    assert mismatch([result], [result.replace(b'"id":7', b'"id":null')], "semantic") == Mismatch(
        "expected id 7, got null"
    )  # a result must carry its id
    batch = b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]'
    one, two = b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0","id":2,"result":{}}'
    found = mismatch([batch], [two, one], "semantic")
    assert found is not None and found.cites == SEPARATE_REPLIES
    assert mismatch([batch], [batch], "semantic") is None
    missing = mismatch([batch], [one], "semantic")
    assert missing is not None and missing.cites == ()


def test_notifications_the_case_does_not_name_never_fail_it() -> None:
    """A server may send a notification at any time, between a request and its answer too."""
    reply = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    changed = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
    log = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
    assert compare([reply], [changed, reply, log], "semantic") is None
    assert compare([reply], [reply, changed], "exact") is not None
    # ...unless the case expects it, or names it in # compare:
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    assert compare([progress, reply], [reply], "semantic") is not None
    assert compare([reply], [reply, log], "semantic", compare_paths=["notifications/message"]) is not None
    assert compare([reply], [changed], "semantic") is not None  # and the answer itself is still owed


def test_semantic_results_are_subsets_with_ignorable_paths() -> None:
    exp = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}],"isError":true}}'
    act = b'{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"b"}],"extra":1}}'
    assert compare([exp], [act], "semantic") == 'result.content[0].text: expected "a", got "b"'
    assert compare([exp], [act], "semantic", ignore=["result.content[*].text"]) is None
    assert compare([exp], [act.replace(b"true", b"false")], "semantic", ignore=["result.content"]) is not None
    assert "result.serverInfo" in DEFAULT_IGNORE and "error.message" in DEFAULT_IGNORE


def test_semantic_batches_and_frames_pair_by_id_and_logs_are_dropped() -> None:
    exp = [b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]']
    act = [b'[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]']
    assert compare(exp, act, "semantic") is None
    log = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
    reply = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert compare([reply], [log, reply], "semantic") is None
    assert compare([reply], [log, reply], "semantic", compare_paths=["notifications/message"]) is not None


def test_server_requests_compare_by_method_not_id() -> None:
    exp = b'{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"maxTokens":100}}'
    act = b'{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{"maxTokens":100,"x":1}}'
    assert compare([exp], [act], "semantic") is None
    assert compare([exp], [act.replace(b"100", b"5")], "semantic") is not None


def test_helpers() -> None:
    assert frame_key(b'{"jsonrpc":"2.0","id":"1","result":{}}') == ("reply", '"1"')
    assert frame_key(b'{"jsonrpc":"2.0","error":{"code":1}}') == ("reply", "")
    assert frame_key(b'{"jsonrpc":"2.0","method":"m"}') == ("notification", "m")
    assert frame_key(b'{"jsonrpc":"2.0","id":1,"method":"m"}') == ("request", "m")
    assert frame_key(b"[1]") == ("batch", "")
    masked = apply_masks(b'{"requestState":"abc\\"def","x":"requestState"}', ["requestState"])
    assert masked == b'{"requestState":"***","x":"requestState"}'
    assert summarize([]) == "silence"


def test_offer_decides_skips() -> None:
    offer = Offer(handshake={"capabilities": {"resources": {"subscribe": False}, "tools": {}}}, tools={"a"})
    session = Session("initialize", "2025-11-25", {}, [])
    assert offer.missing("tool:a", session) is None
    assert offer.missing("tool:b", session) == "the server offers no tool b"
    assert offer.missing("capability:tools", session) is None
    assert offer.missing("capability:resources.subscribe", session) is not None
    assert offer.missing("capability:prompts", session) is not None
    assert offer.missing("bogus:x", session) == "unknown requirement 'bogus:x'"
    # a case whose premise is a capability the server does not advertise
    assert offer.missing("no-capability:tasks", session) is None
    assert offer.missing("no-capability:tools", session) == "the server advertises the tools capability"
    assert offer.missing("no-capability:resources.subscribe", session) is None  # false is not advertised


# --- against our own server ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_our_server_passes_every_rule_in_process() -> None:
    """Semantic and exact: every case of every transcript passes against the everything-server."""
    for mode in ("semantic", "exact"):
        results, offer = await run_check(ServerTarget(create_server), mode=mode)
        assert offer is not None and offer.stateless is not None and not offer.problems
        bad = [(r.file, c.name, c.status, c.reason) for r in results for c in r.cases if c.status != "pass"]
        assert bad == [TASKS_SKIP], mode  # (tests/test_transcripts.py replays that one exactly)
        assert all(r.status == "pass" for r in results)


@pytest.mark.anyio
async def test_runner_reports_timeouts_and_skips(sample: Path) -> None:
    t = parse_transcript(sample)
    observed = await observe(
        t, ServerTarget(create_server), offer=Offer(handshake={"capabilities": {}}), timing=Timing(2, 0.2, 5)
    )
    assert observed["two-steps"].skipped == "the server does not serve 2026-07-28 (server/discover failed)"
    result = judge(t, observed, "exact")
    statuses = {c.name: c.status for c in result.cases}
    assert statuses == {"ping": "pass", "note": "pass", "two-steps": "skip"}
    text = format_report("x", [result], None, verbose=True)
    assert "PASS ping" in text and "SKIP two-steps" in text
    assert report_json("x", [result], None)["summary"] == {"pass": 2, "skip": 1}


@pytest.mark.anyio
async def test_a_wrong_expectation_fails_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "wrong.txt"
    path.write_text(
        SAMPLE.split("=== session: stateless")[0].replace('"result":{}}', '"result":{"x":1}}'), encoding="utf-8"
    )
    t = parse_transcript(path)
    result = judge(t, await observe(t, ServerTarget(create_server), timing=Timing(5, 0.5, 5)), "semantic")
    (ping,) = [c for c in result.cases if c.name == "ping"]
    assert ping.status == "fail" and ping.reason == "result.x is missing (expected 1)"
    assert ping.got == [['{"jsonrpc":"2.0","id":1,"result":{}}']]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_over_stdio_exit_status_and_json() -> None:
    """The real command line against the everything-server over stdio (a few files, to stay quick)."""
    command = [*CLI, "check", "-k", "request-ids", "-k", "cancellation", "--json", "--", *EVERYTHING, "--stdio"]
    done = subprocess.run(command, capture_output=True, timeout=180, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    report = json.loads(done.stdout)
    assert [r["file"] for r in report["rules"]] == ["cancellation", "request-ids"]
    assert report["summary"] == {"pass": sum(len(r["cases"]) for r in report["rules"])}


def test_cli_fails_when_a_rule_fails_and_explains_usage(tmp_path: Path) -> None:
    wrong = SAMPLE.replace('"result":{}}\n\n--- case: note', '"result":{"x":1}}\n\n--- case: note')
    (tmp_path / "wrong.txt").write_text(wrong, encoding="utf-8")
    command = [*CLI, "check", "--transcripts", str(tmp_path), "--", *EVERYTHING, "--stdio"]
    done = subprocess.run(command, capture_output=True, timeout=120, cwd=ROOT, check=False)
    out = done.stdout.decode()
    assert done.returncode == 1, out
    assert "FAIL  wrong: pings are answered" in out and "FAIL ping: result.x is missing (expected 1)" in out
    usage = subprocess.run([*CLI, "check"], capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert usage.returncode == 2 and b"--url URL or -- COMMAND" in usage.stderr


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [*EVERYTHING, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the everything-server did not start on HTTP")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
@pytest.mark.anyio
async def test_our_server_over_streamable_http(http_server: str) -> None:
    """The same transcripts POSTed raw to our Streamable HTTP endpoint: every case passes or is stdio-only."""
    results, offer = await run_check(HttpTarget(http_server), timing=Timing(10, 5, 30))
    assert offer is not None and offer.handshake is not None and offer.stateless is not None
    bad = [(r.file, c.name, c.reason) for r in results for c in r.cases if c.status not in ("pass", "skip")]
    assert bad == []
    skipped = {c.reason for r in results for c in r.cases if c.status == "skip"}
    assert skipped == {"a stdio rule (the http transport has its own)", TASKS_SKIP[3]}


def test_stdio_target_describes_itself() -> None:
    assert StdioTarget(["a", "b"]).description == "stdio: a b"
    assert HttpTarget("http://x/mcp").description == "http: http://x/mcp"
    assert Exchange([b"x"], []).span == (0, 0)


GRADED = """\
# rule: grading follows the keyword of the cited sentence
# spec: -
# revision: all
# cite: 2025-11-25/basic/utilities/ping#2a241dfe

=== session: initialize 2025-11-25

--- case: must-case
# rule: a wrong expectation of a MUST sentence
>>> {"jsonrpc":"2.0","id":1,"method":"ping"}
<<< {"jsonrpc":"2.0","id":1,"result":{"x":1}}

--- case: should-case
# rule: a wrong expectation of a SHOULD sentence
# cite: 2025-11-25/server/utilities/pagination#09ea0fd9
>>> {"jsonrpc":"2.0","id":2,"method":"ping"}
<<< {"jsonrpc":"2.0","id":2,"result":{"x":1}}

--- case: choice-case
# rule: a wrong expectation where the spec leaves a choice
# cite: decision#10
>>> {"jsonrpc":"2.0","id":3,"method":"ping"}
<<< {"jsonrpc":"2.0","id":3,"result":{"x":1}}

--- case: passes
# rule: a right one
>>> {"jsonrpc":"2.0","id":4,"method":"ping"}
<<< {"jsonrpc":"2.0","id":4,"result":{}}

--- case: wrong-code
# rule: an error reply, but with another code than the MUST case expects
>>> {"jsonrpc":"2.0","id":6,"method":"no/such/method"}
<<< {"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"x"}}

--- case: skipped
# rule: one the server cannot run
# needs: tool:no_such_tool
>>> {"jsonrpc":"2.0","id":5,"method":"ping"}
<<< {"jsonrpc":"2.0","id":5,"result":{}}
"""


@pytest.mark.anyio
async def test_cases_are_graded_by_the_keyword_they_cite(tmp_path: Path) -> None:
    """FAIL only for a MUST, WARN for a SHOULD, DIFF for a choice; the report cites the sentence; SKIP lines and
    passing cases only when verbose; --json carries level, status and citations per case."""
    path = tmp_path / "graded.txt"
    path.write_text(GRADED, encoding="utf-8")
    results, offer = await run_check(ServerTarget(create_server), transcripts=[parse_transcript(path)])
    (rule,) = results
    statuses = {c.name: (c.level, c.status) for c in rule.cases}
    assert statuses == {
        "must-case": ("must", "fail"),
        "should-case": ("should", "warn"),
        "choice-case": ("choice", "differs"),
        "passes": ("must", "pass"),
        "wrong-code": ("should", "warn"),
        "skipped": ("must", "skip"),
    }
    text = format_report("x", results, offer)
    assert "    FAIL must-case (MUST 2025-11-25/basic/utilities/ping#2a241dfe): result.x is missing" in text
    assert "    WARN should-case (SHOULD 2025-11-25/server/utilities/pagination#09ea0fd9):" in text
    assert "    DIFF choice-case (CHOICE decision#10):" in text
    assert "    WARN wrong-code (SHOULD jsonrpc-2.0/5.1#codes +1): expected error -32602, got error -32601" in text
    assert "SKIP" not in text and "PASS passes" not in text
    verbose = format_report("x", results, offer, verbose=True)
    assert "    SKIP skipped (MUST 2025-11-25/basic/utilities/ping#2a241dfe): the server offers no tool" in verbose
    (cases,) = [r["cases"] for r in report_json("x", results, offer)["rules"]]
    should = next(c for c in cases if c["name"] == "should-case")
    assert (should["level"], should["status"]) == ("should", "warn")
    assert should["citations"] == [
        {
            "id": "2025-11-25/server/utilities/pagination#09ea0fd9",
            "keyword": "SHOULD",
            "text": "Invalid cursors SHOULD result in an error with code -32602 (Invalid params).",
        }
    ]


def test_only_a_failed_must_fails_the_command(tmp_path: Path) -> None:
    for only in ("should-case", "choice-case"):
        kept = GRADED.split("--- case:")
        text = kept[0] + "".join("--- case:" + c for c in kept[1:] if c.startswith(f" {only}\n"))
        (tmp_path / "graded.txt").write_text(text, encoding="utf-8")
        command = [*CLI, "check", "--transcripts", str(tmp_path), "--", *EVERYTHING, "--stdio"]
        done = subprocess.run(command, capture_output=True, timeout=120, cwd=ROOT, check=False)
        assert done.returncode == 0, done.stdout.decode()
        assert b"WARN  graded" in done.stdout or b"DIFF  graded" in done.stdout
