"""The memory server's two kinds of failure, kept free of MCP so the store can raise them.

The tools turn :class:`MemoryRefused` into a ``ToolError`` (the model can fix its call) and the
control plane into an ``INVALID_PARAMS`` error; :class:`MemoryUnavailable` is an operator's problem
(settings, a changed embedding model) and stops the server at startup.
"""

from __future__ import annotations


class MemoryRefused(Exception):
    """A request that cannot be done as asked; the message names the bad value, what was expected and
    what to do instead. Never contains secrets."""


class MemoryUnavailable(Exception):
    """The server cannot run as configured; the message names the problem and the fix."""


class ModelMismatch(MemoryUnavailable):
    """The database's vectors were made by another embedding model than the configured one."""

    def __init__(self, recorded: str, recorded_dim: int, current: str, current_dim: int | None) -> None:
        self.recorded = recorded
        self.recorded_dim = recorded_dim
        self.current = current
        self.current_dim = current_dim
        size = "dimension not probed yet" if current_dim is None else f"{current_dim} dims"
        super().__init__(
            f"the memory database was indexed with embedding model {recorded!r} ({recorded_dim} dims) "
            f"but the configured model is {current!r} ({size}); vectors of different models "
            "cannot be compared. Fix: run `nexo memory reindex` to re-embed every memory with the "
            "configured model, or configure the old model again (NEXO_MEMORY_EMBEDDING__*)"
        )


class VectorDimensionError(ValueError):
    """A vector has a different number of dimensions than the index was built for.

    Here rather than beside the vector kernels so that catching it imports no numpy.
    """
