"""Reading an HTTP answer's body with a bound (L6): what the HTTP clients of the package (the Streamable HTTP and
SSE clients, the OAuth client) read of a peer's answer.

A peer decides how long its answer is; we decide how much of it we read. :func:`read_limited` stops as soon as the
body is longer than the bound, so a huge (or endless) answer costs no more than the bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = ("read_limited",)


async def read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a streamed answer's body, and whether that is the whole of it: a body of exactly
    ``limit`` bytes is whole; one longer is read no further than the chunk that passes the bound."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], False
    return b"".join(chunks), True
