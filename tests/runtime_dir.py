"""The suite's own ``$XDG_RUNTIME_DIR``, so the daemons the tests start never write their state
records (orchestrator/state_location.py) among those of the person running the tests.

Set for the whole session, in this process's environment: the in-process daemons read it from there,
and the harness passes it on to every ``nexo`` process it starts, so a daemon and the commands that
look for it always agree. A test that wants another records directory sets its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

VARIABLE = "XDG_RUNTIME_DIR"


@pytest.fixture(autouse=True, scope="session")
def private_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = str(runtime)
    yield
    if before is None:
        os.environ.pop(VARIABLE, None)
    else:
        os.environ[VARIABLE] = before
