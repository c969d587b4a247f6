"""Every code block of README.md and docs/ runs as written (``docs_harness`` says how each kind is run), and the
harness itself classifies, matches and fails as it says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from docs_harness import (
    ROOT,
    Block,
    DocError,
    DocumentRun,
    PortMap,
    classify,
    console_commands,
    documents,
    listen_address,
    match_output,
    parse_blocks,
    run_document,
    shell_commands,
    without_comment,
)


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_document_runs(path: Path) -> None:
    run_document(path)


def test_every_document_is_collected() -> None:
    found = {str(path.relative_to(ROOT)) for path in documents()}
    assert {"README.md", "CONTRIBUTING.md", "SECURITY.md"} <= found
    assert {str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md")} <= found


# -- the harness itself ----------------------------------------------------------------------------------------


def blocks_of(text: str) -> list[Block]:
    return parse_blocks(text, Path("page.md"))


def run_text(text: str, tmp_path: Path) -> int:
    page = tmp_path / "page.md"
    page.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    return DocumentRun(page, work).run()


def test_blocks_and_their_directives_are_parsed() -> None:
    text = (
        "Intro\n\n"
        "<!-- not-run: installs software -->\n"
        "```sh\npip install x\n```\n\n"
        "- a list item:\n\n"
        "  ```python\n  print(1)\n  ```\n"
        "<!-- output -->\n"
        "```text\n1\n```\n"
        "````markdown\n```python\nnested\n```\n````\n"
    )
    blocks = blocks_of(text)
    assert [(b.line, b.lang, b.code, b.directives) for b in blocks] == [
        (4, "sh", "pip install x\n", {"not-run": "installs software"}),
        (10, "python", "print(1)\n", {}),
        (14, "text", "1\n", {"output": ""}),
        (17, "markdown", "```python\nnested\n```\n", {}),
    ]


def test_a_directive_applies_only_to_the_block_right_after_it() -> None:
    blocks = blocks_of("<!-- not-run: why -->\nSome prose.\n\n```sh\nls\n```\n")
    assert blocks[0].directives == {}


def test_an_unclosed_fence_fails() -> None:
    with pytest.raises(DocError, match="never closed"):
        blocks_of("```python\nprint(1)\n")


@pytest.mark.parametrize(
    ("fence", "kind"),
    [
        ("```python\n# server.py\nx = 1\n```", "python-file"),
        ("```python\n# sub/app.py\nx = 1\n```", "python-file"),
        ("```python\nprint(1)\n```", "python"),
        ("```sh\nls\n```", "sh"),
        ("```bash\nls\n```", "sh"),
        ("```console\n$ ls\n```", "console"),
        ("```json\n{}\n```", "json"),
        ("```toml\n[x]\n```", "toml"),
        ("```text\nanything\n```", "skip"),
        ("<!-- not-run: a fragment -->\n```python\nserver.tool()\n```", "skip"),
        ("<!-- not-run: a fragment -->\n```rust\nfn main() {}\n```", "skip"),
        ("<!-- output -->\n```text\n1\n```", "output"),
    ],
)
def test_classification(fence: str, kind: str) -> None:
    (block,) = blocks_of(fence + "\n")
    assert classify(block) == kind


@pytest.mark.parametrize(
    ("fence", "message"),
    [
        ("```\nsome code\n```", "a fence without a language is not run"),
        ("```rust\nfn main() {}\n```", "```rust is not run"),
        ("<!-- not-run: -->\n```python\nx\n```", "needs a reason"),
        ("<!-- output -->\n```python\nx\n```", "goes before a ```text block"),
    ],
)
def test_an_unmarked_block_it_cannot_classify_fails(fence: str, message: str) -> None:
    (block,) = blocks_of(fence + "\n")
    with pytest.raises(DocError, match=message) as caught:
        classify(block)
    assert "page.md:" in str(caught.value)


def test_an_unclassifiable_block_fails_the_document_before_anything_runs(tmp_path: Path) -> None:
    text = "```python\nopen('ran', 'w').close()\n```\n\n```\nunmarked\n```\n"
    with pytest.raises(DocError, match=r"page\.md:5: a fence without a language"):
        run_text(text, tmp_path)
    assert not (tmp_path / "work" / "ran").exists()


@pytest.mark.parametrize(
    ("expected", "actual", "matches"),
    [
        ("a\nb\n", "a\nb\n", True),
        ("a\nb\n", "a\nc\n", False),
        ("a\n...\nz\n", "a\nb\nc\nz\n", True),
        ("a\n...\nz\n", "a\nz\n", True),
        ("a\n...\n", "a\nb\n", True),
        ("took ... ms\n", "took 12.5 ms\n", True),
        ("took ... ms\n", "took 12.5 s\n", False),
        ("a  \n\n", "\na\n", True),
        ("", "", True),
        ("", "something\n", False),
        ("a.b\n", "axb\n", False),
    ],
)
def test_expected_output_matching(expected: str, actual: str, matches: bool) -> None:
    assert match_output(expected, actual) is matches


def test_shell_commands_join_continuations_and_drop_comments() -> None:
    code = "# a comment\njsonrpc-mcp call \\\n  --url U ping   # trailing\n\nls\n"
    assert shell_commands(code) == ["jsonrpc-mcp call    --url U ping   # trailing", "ls"]


def test_console_commands_and_their_output() -> None:
    code = "$ echo a \\\n    b\na b\n$ true\n$ printf 'x\\ny'\nx\ny\n"
    assert console_commands(code) == [("echo a b", "a b"), ("true", ""), ("printf 'x\\ny'", "x\ny")]
    with pytest.raises(DocError, match="not with a"):
        console_commands("output first\n$ ls\n")


@pytest.mark.parametrize(
    ("command", "address"),
    [
        ("jsonrpc-mcp serve server.py", None),
        ("jsonrpc-mcp serve server.py --http 127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("jsonrpc-mcp serve --tcp [::1]:7000", ("::1", 7000)),
        ("jsonrpc-mcp serve server.py --unix mcp.sock", "mcp.sock"),
        ("uvicorn app:app --port 8001", ("127.0.0.1", 8001)),
        ("python conformance/everything_server.py --port 38413 &", ("127.0.0.1", 38413)),
        ("python conformance/everything_server.py --port 3000 &   # for HTTP", ("127.0.0.1", 3000)),
        ("jsonrpc-mcp serve s.py   # not --http 127.0.0.1:8000", None),
        ("jsonrpc-mcp list --tcp 127.0.0.1:7000", None),
        ("jsonrpc-mcp call --url http://127.0.0.1:8000/mcp ping", None),
    ],
)
def test_listening_commands(command: str, address: object) -> None:
    assert listen_address(command) == address


@pytest.mark.parametrize(
    ("command", "bare"),
    [
        ("python s.py --port 3000 &   # a server", "python s.py --port 3000 &"),
        ("echo 'a # b' # c", "echo 'a # b'"),
        ('echo "#x"', 'echo "#x"'),
        ("echo a#b", "echo a#b"),
        ("# only a comment", ""),
    ],
)
def test_trailing_comments(command: str, bare: str) -> None:
    assert without_comment(command) == bare


def test_a_background_command_must_name_its_address() -> None:
    with pytest.raises(DocError, match="must name the address"):
        listen_address("python server.py &")


def test_ports_are_replaced_consistently() -> None:
    ports = PortMap()
    first = ports.apply("--http 127.0.0.1:8000 --url http://localhost:8000/mcp --port 8000 ('127.0.0.1', 7000)")
    new = ports.ports["8000"]
    assert (
        first
        == f"--http 127.0.0.1:{new} --url http://localhost:{new}/mcp --port {new} ('127.0.0.1', {ports.ports['7000']})"
    )
    assert new != "8000"
    assert ports.apply("127.0.0.1:8000") == f"127.0.0.1:{new}"


def test_a_document_runs_its_blocks_in_order_in_one_folder(tmp_path: Path) -> None:
    text = (
        "```python\n# greet.py\ndef hello(name):\n    return f'hello {name}'\n```\n\n"
        "```python\nfrom greet import hello\nprint(hello('docs'))\n```\n\n"
        "<!-- output -->\n```text\nhello ...\n```\n\n"
        "```console\n$ python -c 'import greet; print(greet.hello(1))'\nhello 1\n```\n\n"
        '```json\n{"a": [1, 2]}\n```\n\n'
        "<!-- not-imported: reads NAME -->\n```python\n# env.py\nimport os\nNAME = os.environ['NAME']\n```\n\n"
        "```console\n$ NAME=x python -c 'import env; print(env.NAME)'\nx\n```\n\n"
        "<!-- not-run: would fail -->\n```sh\nfalse\n```\n"
    )
    assert run_text(text, tmp_path) == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```python\nraise SystemExit(3)\n```\n", r"page\.md:1: the program exited with status 3"),
        ("```python\n# broken.py\nimport no_such_module_here\n```\n", r"importing broken\.py exited with status 1"),
        (
            "<!-- not-imported: needs X -->\n```python\n# broken.py\ndef f(:\n```\n",
            r"compiling broken\.py exited with status 1",
        ),
        ("<!-- not-imported: -->\n```python\n# a.py\nx = 1\n```\n", "needs a reason"),
        ("```sh\ntrue\nfalse\n```\n", r"`false` exited with status 1"),
        ("```sh\ncd /\n```\n", "would not last"),
        ("```console\n$ echo two\none\n```\n", "--- the page shows\n\\+\\+\\+ it printed\n@@ -1 \\+1 @@\n-one\n\\+two"),
        ("```python\nprint(2)\n```\n<!-- output -->\n```text\n1\n```\n", r"the output of .*page\.md:1 differs"),
        ("<!-- output -->\n```text\n1\n```\n", "must follow a python program"),
        ("```json\n{'single': 'quotes'}\n```\n", "not JSON"),
        ("<!-- timeout: 0.5 -->\n```python\nimport time\ntime.sleep(30)\n```\n", "did not finish in 0.5 s"),
    ],
)
def test_a_block_that_does_not_run_as_written_fails(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DocError, match=message):
        run_text(text, tmp_path)


def test_a_listening_command_is_started_used_and_stopped(tmp_path: Path) -> None:
    text = (
        "```python\n# server.py\nfrom jsonrpc_mcp import Server\nserver = Server('s', version='1')\n\n"
        "@server.tool()\ndef add(a: int, b: int) -> int:\n    return a + b\n```\n\n"
        "```sh\njsonrpc-mcp serve server.py --tcp 127.0.0.1:7000   # stays up until the page ends\n```\n\n"
        '```console\n$ jsonrpc-mcp call --json --tcp 127.0.0.1:7000 tools/call add \'{"a": 1, "b": 2}\'\n...\n'
        '  "structuredContent": {\n    "result": 3\n  }...\n...\n```\n'
    )
    page = tmp_path / "page.md"
    page.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    run = DocumentRun(page, work)
    assert run.run() == 3
    (server,) = run.background
    assert server.proc.returncode is not None  # stopped when the page ended


def test_a_server_that_exits_instead_of_listening_fails(tmp_path: Path) -> None:
    text = "```sh\njsonrpc-mcp serve no_such_file.py --http 127.0.0.1:8000\n```\n"
    with pytest.raises(DocError, match=r"exited with status 1\n.*no such file: no_such_file\.py"):
        run_text(text, tmp_path)


# -- what a guide promises beyond its own run ------------------------------------------------------------------


def test_the_testing_guides_tests_skip_trio_where_it_is_not_installed(tmp_path: Path) -> None:
    """docs/testing.md's conftest.py asks for trio only where it is installed: without it, the trio runs are
    skipped and the asyncio ones pass (the guide's run has trio, as the dev extra installs it)."""
    import subprocess
    import sys

    page = ROOT / "docs" / "testing.md"
    for block in parse_blocks(page.read_text(), page):
        first = block.code.split("\n", 1)[0]
        if block.lang == "python" and first.startswith("# ") and first.endswith(".py"):
            (tmp_path / first[2:]).write_text(block.code)
    no_trio = tmp_path / "no_trio"
    no_trio.mkdir()
    (no_trio / "sitecustomize.py").write_text('import sys\n\nsys.modules["trio"] = None  # import trio fails\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "test_calculator.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(no_trio)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "11 passed, 11 skipped" in done.stdout, done.stdout


def test_the_authorization_guides_web_app_answers_the_host_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/authorization.md's web.py (the app mounted in Starlette) accepts requests for notes.example.com, the
    host its resource names: a request without a token gets the 401 challenge, not the 403 of a host not allowed
    (which another host still gets)."""
    import importlib
    import sys

    import httpx
    from http_support import ServerThread

    page = ROOT / "docs" / "authorization.md"
    for block in parse_blocks(page.read_text(), page):
        first = block.code.split("\n", 1)[0]
        if block.lang == "python" and first in ("# notes_app.py", "# web.py"):
            (tmp_path / first[2:]).write_text(block.code)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("notes_app", "web"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    web = importlib.import_module("web")
    thread = ServerThread(web.web)
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        with httpx.Client(timeout=30) as http:
            url = thread.url + "/"  # (Starlette's Mount("/mcp") redirects /mcp there)
            named = http.post(url, json=body, headers={**headers, "Host": "notes.example.com"})
            other = http.post(url, json=body, headers={**headers, "Host": "elsewhere.example"})
    finally:
        thread.stop()
    assert named.status_code == 401 and "resource_metadata=" in named.headers["www-authenticate"]
    assert other.status_code == 403
