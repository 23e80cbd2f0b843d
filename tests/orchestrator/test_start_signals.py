"""Ctrl-C and SIGTERM during a start are noted, not raised mid-statement; a second Ctrl-C raises."""

from __future__ import annotations

import os
import signal

import pytest

from orchestrator import start_signals


def test_a_signal_during_a_start_is_noted_and_the_previous_handlers_come_back() -> None:
    before = {signum: signal.getsignal(signum) for signum in start_signals.SIGNALS}
    with start_signals.noted():
        assert start_signals.requested() is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert start_signals.requested() == signal.SIGTERM
    assert start_signals.requested() is None
    assert {signum: signal.getsignal(signum) for signum in start_signals.SIGNALS} == before


def _two_ctrl_c(reached: list[object]) -> None:
    with start_signals.noted():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append(start_signals.requested())
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after the second")


def test_a_second_ctrl_c_while_a_stage_blocks_raises_as_python_would() -> None:
    reached: list[object] = []
    with pytest.raises(KeyboardInterrupt):
        _two_ctrl_c(reached)
    assert reached == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
