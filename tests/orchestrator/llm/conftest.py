from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.llm import FakeLLM
from tests.orchestrator.llm.support import VirtualTime


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def vtime() -> VirtualTime:
    return VirtualTime()
