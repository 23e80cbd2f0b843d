"""The turn CPU bench reads the CPU of every process below ``nexo run``, labelled by its server."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.memory import process_label
from bench.support import process_tree
from bench.turn_cpu import cpu_ms

# A child that starts a grandchild and says its pid; both wait on the same stdin and end at its end.
CHILD = (
    "import subprocess, sys\n"
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'])\n"
    "print(grandchild.pid, flush=True)\n"
    "sys.stdin.read()\n"
    "grandchild.wait()\n"
)


def test_the_processes_below_a_root_are_found_and_named_by_their_server() -> None:
    # The child carries a server's module name on its command line, as a forked server shows it.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "-m", "servers.audit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        root = os.getpid()
        assert {root, child.pid, grandchild} <= set(process_tree(root))
        assert process_label(child.pid, root, {"audit": "servers.audit"}) == "audit"
        assert process_label(root, root, {"audit": "servers.audit"}) == "orchestrator"
        spent = cpu_ms({root: "orchestrator", child.pid: "audit", 2**22 + 1: "gone"})  # gone: skipped
        assert set(spent) == {root, child.pid}
        assert all(total >= 0 for _, total in spent.values())
    finally:
        child.stdin.close()  # end of input: the grandchild and then the child end
        child.wait(timeout=30)
        child.stdout.close()
