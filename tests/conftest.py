"""Shared test fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def standard_asyncio_loop() -> asyncio.AbstractEventLoop:
    """asyncio's own event loop, whatever policy is installed process-wide: older uvicorn releases (0.30, the
    lowest the project supports) install uvloop's when a test serves with them, and the tests of the asyncio
    backend would then run on uvloop."""
    loop_class: Any = getattr(asyncio, "EventLoop", None)  # (Python 3.13 and later)
    if loop_class is None:
        loop_class = asyncio.ProactorEventLoop if sys.platform == "win32" else asyncio.SelectorEventLoop  # type: ignore[attr-defined]
    return loop_class()  # type: ignore[no-any-return]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"loop_factory": standard_asyncio_loop}), id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param
