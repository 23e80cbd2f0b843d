"""``python -m servers.memory``: long-term hybrid memory, session transcripts and MEMORY.md."""

import os

# numpy's OpenBLAS gives a matrix product one thread per core and keeps those threads spinning
# after it, waiting for the next one. The memory server's products are small (a few hundred int8
# copies against the question), so the spinning was most of their cost: about 11 ms of CPU per
# hybrid recall at a million memories, taken from whatever else the machine runs (docs/memory.md).
# Set before numpy is first imported (every module of this package that uses it is imported after
# this); an operator's own setting stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
