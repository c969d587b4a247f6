"""bench/run.py's targets table shows what was measured (here from figures given to it: it measures nothing in
the tests, benchmarks are never timed tests)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import run


def sessions(before_kb: int, *after_delete_kb: int) -> dict[str, Any]:
    """What ``run.sessions`` saves: the first round's figures, and every round's."""
    rounds = []
    for after in after_delete_kb:
        rounds.append({"server_rss_before_kb": before_kb, "server_rss_after_delete_kb": after})
        before_kb = after
    return {"sessions": 1000, "sessions_ok": 1000, "errors": 0, **rounds[0], "rounds": rounds}


def row(table: str, target: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if line.startswith(f"| {target}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize(
    ("rss_kb", "ratio", "growth", "shown", "met"),
    [
        ((34288, 48004, 53244), 1.4, 10.9, ["1.40x", "+10.9%"], False),  # (the figures of a saved run)
        ((40000, 50000, 49000), 1.25, -2.0, ["1.25x", "-2.0%"], True),  # on the bound, and less after round 2
    ],
)
def test_the_memory_targets_show_the_measured_ratio_and_growth(
    rss_kb: tuple[int, ...],
    ratio: float,
    growth: float,
    shown: list[str],
    met: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = run.targets_report({}, {"runs": [], "sessions": sessions(*rss_kb)})
    table = capsys.readouterr().out
    status = "met" if met else "NOT met"
    assert row(table, "memory returns after the sessions end")[1:] == [shown[0], status]
    assert row(table, "no growth when 1,000 more sessions come and go")[1:] == [shown[1], status]
    assert report["sessions_mem_returns"] == {"value": ratio, "bound": 1.25, "op": "<=", "met": met}
    assert report["sessions_no_growth"] == {"value": growth, "bound": 5.0, "op": "<=", "met": met}
    json.dumps(report)  # (saved with the run)


def test_without_the_figures_the_memory_targets_are_not_judged(capsys: pytest.CaptureFixture[str]) -> None:
    out = {"runs": [], "sessions": {"sessions": 1000, "sessions_ok": 1000, "rounds": [{}]}}
    report = run.targets_report({}, out)
    table = capsys.readouterr().out
    assert row(table, "memory returns after the sessions end")[1:] == ["—", "—"]
    assert row(table, "no growth when 1,000 more sessions come and go")[1:] == ["—", "—"]
    assert report["sessions_mem_returns"]["met"] is None and report["sessions_no_growth"]["met"] is None


def measured(target: str, rps: float, cpu_us: float, rnd: int = 0, transport: str = "stdio") -> dict[str, Any]:
    """What ``run.measure`` saves of one run (the fields the tables read)."""
    return {
        "target": target,
        "transport": transport,
        "payload": "1k",
        "concurrency": 64,
        "round": rnd,
        "rps": rps,
        "latency_us": {"p50": 400.0, "p99": 900.0},
        "server_cpu_us_per_req": cpu_us,
        "server_rss_peak_kb": 20480,
        "requests_ok": 1000,
    }


def test_the_comparison_shows_server_cpu_per_call_beside_calls_per_second_and_judges_the_def_tool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [
        measured(target, rps, cpu, rnd)
        for rnd in range(2)
        for target, rps, cpu in (
            ("ours", 200_000.0, 5.0),
            ("ours-thread", 120_000.0, 9.0),
            ("ours-async", 130_000.0, 7.5),
            ("ts-sdk-v1", 90_000.0, 13.0),
        )
    ]
    out = {"runs": runs, "targets_run": ["ours", "ours-thread", "ours-async", "ts-sdk-v1"]}
    report = run.targets_report(run.compare_tables(out), out)
    table = capsys.readouterr().out
    ratios = table[table.index("calls/s of each form of ours") :]
    assert row(ratios, "stdio 1 KiB x 64 | ours-thread")[2:] == ["9.0", "1.2", "1.33 (cpu 0.69)"]
    assert row(ratios, "stdio 1 KiB x 64 | ours-async")[2:] == ["7.5", "1.0", "1.44 (cpu 0.58)"]
    assert report["thread_cpu_stdio"] == {"value": 1.2, "bound": 1.5, "op": "<=", "met": True}
    assert report["thread_stdio_vs_ts"] == {"value": 1.33, "bound": 1.0, "op": ">=", "met": True}
    assert report["thread_cpu_http"]["met"] is None  # (no HTTP runs)
