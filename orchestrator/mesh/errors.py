"""A server that cannot be reached, and one line for any failure of a connection."""

from __future__ import annotations


class ServerUnavailable(Exception):
    """The server is not connected (restarting, breaker open, or it died during the call)."""


def describe_error(exc: BaseException) -> str:
    """One line for status and logs; unwraps the exception groups task groups produce."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"
