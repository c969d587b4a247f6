"""Unwrap one-exception groups at our public async context managers (L4 helper).

Users of ``async with Client.connect_stdio(...)`` should see the error their own code raised, not an
``ExceptionGroup`` made by the task group we run underneath.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ("unwrap_group",)


@contextmanager
def unwrap_group() -> Iterator[None]:
    try:
        yield
    except BaseExceptionGroup as group:
        inner = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None
