"""bench/scale.py (make bench-scale) keeps working: its arguments, the configurations it measures, and the pieces
that start and drive real servers, run small. It measures nothing here (benchmarks are never timed tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import scale


def test_the_defaults_measure_what_docs_performance_reports() -> None:
    args = scale.parse_args([])
    assert (args.workers, args.rounds, args.sessions, args.session_workers) == ([1, 2, 4], 3, 10_000, 2)
    names = [cfg.name for cfg in scale.configs(args)]
    assert len(names) == len(set(names))
    # handshake era: several workers only with Redis (serve --workers refuses without it); 2026-07-28: both
    assert [n for n in names if n.startswith("handshake/") and n.endswith("/alone")] == [
        "handshake/one-session/w1/alone",
        "handshake/session-per-conn/w1/alone",
    ]
    assert {n for n in names if n.startswith("stateless/")} == {
        f"stateless/w{n}/{shared}" for n in (1, 2, 4) for shared in ("alone", "redis")
    }
    smoke = scale.parse_args(["--smoke"])
    assert smoke.sessions < 100 and smoke.duration < 1 and smoke.workers == [1, 2]
    only = scale.parse_args(["--era", "stateless", "--workers", "3"])
    assert [cfg.name for cfg in scale.configs(only)] == ["stateless/w3/alone", "stateless/w3/redis"]


@pytest.mark.parametrize(
    "bad", [["--workers", "0"], ["--workers", "two"], ["--rounds", "0"], ["--sessions", "0"], ["--session-batch", "-1"]]
)
def test_bad_arguments_are_refused(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        scale.parse_args(bad)
    assert exit_.value.code == 2 and "Traceback" not in capsys.readouterr().err


def test_serve_still_refuses_several_workers_without_a_backend(tmp_path: Path) -> None:
    with open(tmp_path / "server.log", "wb") as log:
        assert scale.refuses_workers_without_backend(log)


@pytest.mark.slow
def test_workers_without_a_backend_each_answer(tmp_path: Path) -> None:
    with open(tmp_path / "server.log", "wb") as log:
        served = scale.Served(2, None, log)
        try:
            served.wait_ready()  # every worker answered pid
            workers = served.worker_pids()
            assert len(workers) == 2 and served.pid not in workers
        finally:
            served.stop()
        assert served.proc.returncode is not None


@pytest.mark.slow
def test_sessions_are_opened_held_and_deleted(tmp_path: Path) -> None:
    with open(tmp_path / "server.log", "wb") as log:
        served = scale.Served(1, None, log, "--keep-alive", "600")
        try:
            served.wait_ready()
            port = scale.mcpload.HttpTarget(served.url).port
            conns, figures = scale.open_sessions(served.url, 12, 5, 64)
            try:
                assert figures["sessions_ok"] == figures["distinct_session_ids"] == figures["calls_ok"] == 12
                assert figures["errors"] == 0
                assert scale.established(port) >= 12  # every connection still open
                ids = [c.sid for c in conns]
            finally:
                for c in conns:
                    c.close()
            deleted = scale.delete_all(served.url, ids, 4)
            assert deleted["deleted_ok"] == 12 and deleted["delete_errors"] == 0
            again = scale.delete_all(served.url, ids[:1], 1)  # gone: a second DELETE finds nothing
            assert again["deleted_ok"] == 0 and "HTTP 404" in again["delete_error_samples"][0]
        finally:
            served.stop()
