"""Operator requests answered by the running ``nexo run`` through its control socket.

A command such as ``nexo pair`` or ``nexo agent ps`` sends the JSON of one control-plane request;
the daemon sends it to the server its own config names and returns the result as JSON. The command
imports neither the MCP SDK nor pydantic, validates no config and starts no server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from orchestrator.cli.common import fail
from orchestrator.cli.locate import state_dir
from orchestrator.control import ask
from orchestrator.sockets import control_path


class NotAnswered(Exception):
    """The running daemon could not be asked, or refused; the message is the line to show."""


def daemon_answer(config: str | None, request: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``config``'s running daemon to one control request (5 s at most); raises
    NotAnswered naming ``nexo run`` when none runs, or with the daemon's own error."""
    state = state_dir(config)
    try:
        answer: dict[str, Any] = anyio.run(ask, control_path(state), request)
    except (OSError, TimeoutError) as exc:
        raise NotAnswered(
            f"nexo is not running on {state} ({exc.__class__.__name__}); start it with `nexo run`"
        ) from exc
    if "error" in answer:
        raise NotAnswered(str(answer["error"]))
    return answer


def answer_if_running(config: str | None, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """The answer of ``config``'s running daemon to one control request; None when none answered
    (no socket, one left behind by a daemon that is gone, or no answer within ``timeout``): the
    command then does without it. Found from the state directory alone: no config validated."""
    try:
        answer: dict[str, Any] = anyio.run(ask, control_path(state_dir(config)), request, timeout)
    except (OSError, TimeoutError):
        return None
    return answer


ANSWER_TIMEOUT_S = 35.0
"""The daemon's own wait for the server (30 s), and a little more."""


def ask_running(config: str | None, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """``{"result": ...}`` or ``{"error": ..., "code"?: ...}`` from the daemon of ``config``'s state
    directory; None when no daemon runs there."""
    path = control_path(state_dir(config))
    if not path.exists():
        return None
    return anyio.run(ask_operator, path, method, params)


async def ask_operator(
    path: Path, method: str, params: dict[str, Any], *, max_bytes: int = 1024 * 1024
) -> dict[str, Any] | None:
    """One operator request to the daemon listening on ``path``: as :func:`ask_running`, for a
    command that asks several in one event loop (an answer of up to ``max_bytes``)."""
    request = {"op": "operator", "method": method, "params": params}
    try:
        answer: dict[str, Any] = await ask(path, request, ANSWER_TIMEOUT_S, max_bytes=max_bytes)
    except (ConnectionRefusedError, FileNotFoundError):
        return None  # a socket left behind by a daemon that is gone
    except (OSError, TimeoutError, anyio.EndOfStream, anyio.IncompleteRead) as exc:
        return {
            "error": f"the running nexo did not answer ({exc.__class__.__name__}); "
            "see `nexo status`, then try again"
        }
    result = answer.get("result")
    if isinstance(result, dict):
        result.pop("meta", None)
    return answer


def through_daemon(
    config: str | None,
    method: str,
    params: dict[str, Any],
    label: str,
    show: Callable[[dict[str, Any]], int],
) -> int | None:
    """``show`` the running daemon's result of one operator request and return its exit status; None
    when no daemon runs (the command then does it itself); exit 1 naming ``label`` when the daemon
    answered with an error."""
    answer = ask_running(config, method, params)
    if answer is None:
        return None
    result = answer.get("result")
    if not isinstance(result, dict):
        return fail(f"{label}: {answer.get('error', answer)}")
    return show(result)
