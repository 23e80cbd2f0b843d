"""Benchmarks of the orchestrator: tool-call latency, per-turn overhead, cold start and memory.

Run them with ``make bench`` (``make bench ARGS=--quick`` for a short run, ``ARGS=--json`` for
machine-readable figures). Every measurement is printed beside a baseline measured in the same run,
so the ratio stays meaningful on any machine.
"""

# Several benchmarks run the memory server's code in their own process, and import numpy before
# it: the server's package comes first here, so numpy's BLAS runs on one thread as in the server
# (servers/memory/__init__.py).
import servers.memory  # noqa: F401
