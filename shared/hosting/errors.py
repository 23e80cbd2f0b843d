"""Failures to host a server as configured, and finding them in a failed start."""

from __future__ import annotations


class HostingError(Exception):
    """A server cannot be hosted as configured; the message says how to fix it."""


def startup_failure(exc: BaseException) -> HostingError | None:
    """The :class:`HostingError` behind a failed start, however deep in exception groups it sits."""
    if isinstance(exc, HostingError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = startup_failure(inner)
            if found is not None:
                return found
    return None
