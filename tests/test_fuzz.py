"""The bounded fuzz of ``make test``: tens of thousands of seeded frames, malformed and valid-but-odd, through a real
server process over stdio and over Streamable HTTP (``tests/fuzzing.py`` says what is sent and what each frame is
owed). The process must never die, never hang, never answer 5xx, and never write a traceback or a source path."""

from __future__ import annotations

import pytest
from fuzzing import fuzz_http, fuzz_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

STDIO_FRAMES = 20_000
HTTP_FRAMES = 4_000


# One backend each: the server under test is a process of its own either way, and each run takes seconds.


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_fuzz_over_stdio() -> None:
    report = await fuzz_stdio(seed=20_260_728, count=STDIO_FRAMES)
    assert report.frames == STDIO_FRAMES
    assert (report.crashes, report.hangs, report.problems) == (0, 0, []), report.line()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_fuzz_over_http() -> None:
    report = await fuzz_http(seed=20_251_125, count=HTTP_FRAMES)
    assert report.frames == HTTP_FRAMES
    assert (report.crashes, report.hangs, report.problems) == (0, 0, []), report.line()
