"""Operator requests answered by the running ``nexo run`` through its control socket.

A command such as ``nexo pair`` or ``nexo agent ps`` sends the JSON of one control-plane request;
the daemon sends it to the server its own config names and returns the result as JSON. The command
imports neither the MCP SDK nor pydantic, validates no config and starts no server.
"""

from __future__ import annotations

from typing import Any

import anyio

from orchestrator.cli.locate import state_dir
from orchestrator.control import ask, control_path

ANSWER_TIMEOUT_S = 35.0
"""The daemon's own wait for the server (30 s), and a little more."""


def ask_running(config: str | None, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """``{"result": ...}`` or ``{"error": ..., "code"?: ...}`` from the daemon of ``config``'s state
    directory; None when no daemon runs there."""
    path = control_path(state_dir(config))
    if not path.exists():
        return None
    request = {"op": "operator", "method": method, "params": params}
    try:
        answer: dict[str, Any] = anyio.run(ask, path, request, ANSWER_TIMEOUT_S)
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
