"""The turn CPU bench finds every process below ``nexo run`` and names each by its server."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.turn_cpu import cpu_ms, descendants, process_name

# A child that starts a grandchild, says its pid once it runs, and waits.
CHILD = (
    "import subprocess, sys, time\n"
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(grandchild.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_the_processes_below_a_root_are_found_and_named_by_their_server() -> None:
    # The child carries a server's module name on its command line, as a forked server shows it.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "-m", "servers.audit"], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    try:
        assert {os.getpid(), child.pid, grandchild} <= descendants(os.getpid())
        assert process_name(child.pid) == "audit"
        assert process_name(os.getpid()) == "orchestrator"
        spent = cpu_ms({os.getpid(), child.pid, 2**22 + 1})  # a pid that does not exist is skipped
        assert set(spent) == {os.getpid(), child.pid}
        assert all(total >= 0 for _, total in spent.values())
    finally:
        os.kill(grandchild, 9)
        child.kill()
        child.wait()
        child.stdout.close()
