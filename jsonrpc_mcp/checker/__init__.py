"""Golden wire transcripts: parse them, replay them against any MCP server, compare, report (L7).

A transcript (``jsonrpc_mcp/transcripts/*.txt``, shipped in the package) pins one family of spec rules as raw
frames; its format is described in :mod:`.transcripts`. The parts: :mod:`.transcripts` (the format),
:mod:`.frames` and :mod:`.comparison` (what a frame is, and whether it matches), :mod:`.channels` (stdio,
in-process and Streamable HTTP targets), :mod:`.probe` (what the server offers), :mod:`.runner` (replaying
sessions), :mod:`.grading` (a status per case), :mod:`.report` and :mod:`.cli` (``jsonrpc-mcp check``). The whole
story, and what the official SDK does with the same frames, is in ``docs/conformance.md``.
"""

from __future__ import annotations

from .channels import Channel, HttpTarget, ServerTarget, StdioTarget, Target, Unreachable
from .cli import (
    CHECK_EPILOG,
    add_check_arguments,
    add_environment_arguments,
    check_epilog,
    env_pair,
    header_pair,
    http_url,
    main,
    run_check_command,
)
from .comparison import compare
from .frames import apply_masks, frame_key, summarize
from .grading import CaseResult, Observation, RuleResult, judge
from .probe import Offer, Timing, probe
from .report import format_report, report_json
from .runner import observe, replay, rewrite, run_check
from .transcripts import (
    Case,
    Exchange,
    Session,
    Transcript,
    TranscriptError,
    default_transcript_dir,
    load_transcripts,
    parse_transcript,
)

__all__ = (
    "Transcript",
    "Session",
    "Case",
    "Exchange",
    "Observation",
    "Timing",
    "CaseResult",
    "RuleResult",
    "Offer",
    "Target",
    "StdioTarget",
    "HttpTarget",
    "ServerTarget",
    "parse_transcript",
    "load_transcripts",
    "default_transcript_dir",
    "replay",
    "observe",
    "compare",
    "probe",
    "rewrite",
    "run_check",
    "header_pair",
    "http_url",
    "Unreachable",
    "CHECK_EPILOG",
    "check_epilog",
    "env_pair",
    "add_environment_arguments",
    "main",
    "TranscriptError",
    "Channel",
    "frame_key",
    "apply_masks",
    "judge",
    "summarize",
    "format_report",
    "report_json",
    "add_check_arguments",
    "run_check_command",
)
