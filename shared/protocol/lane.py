"""The control lane's wire terms: nexo's own JSON-RPC methods answered without the SDK's request
machinery, on a stdio connection between two nexo processes.

Every ``nexo/...`` control method (an events pull, a ledger append, a goal's registry entry, a
session write) is a plain JSON-RPC 2.0 request. Through the MCP SDK each one costs about 1.6 ms of
CPU in the client and 2 ms in the server (validation of the whole message union, middleware, a
task and three memory streams per request), several times what the method itself does. A server
that serves the lane says so in its capabilities (``nexo/lane``); a client that sees it sends its
control requests with an id of its own (``nexo:<n>``) straight onto the pipe, and the server
answers them from the line itself. The messages are the same JSON-RPC requests, results and
errors; only who parses them changes. A server may also list tools the lane calls (a channel's
outbound tool, which every reply calls); every other tool, the handshake and everything over HTTP
stay with the SDK.

The answer's shape is JSON-RPC's: ``result`` as the handler's model dumps it (by alias, without
``None``s, as the SDK dumps it), or ``error`` with the SDK's codes for the same failures (the
method's own error, ``-32602`` for invalid params, ``-32603`` for anything else). What the SDK adds
to a 2026-07-28 answer for clients of every kind (``resultType`` and its ``serverInfo`` stamp in
``_meta``) is left out: both ends are nexo, and neither reads them on a control method.
"""

from __future__ import annotations

import json
from typing import Any

LANE_EXTENSION = "nexo/lane"
ID_PREFIX = "nexo:"
"""Ids of lane requests. The SDK's own requests carry integers, so neither end mistakes the other's."""
MARK = '"nexo:'
"""A line without this text is no lane message (checked before parsing anything)."""
CANCELLED = "notifications/cancelled"
INTERNAL_ERROR = -32603


def is_lane_id(value: object) -> bool:
    return type(value) is str and value.startswith(ID_PREFIX)


def parsed(line: str) -> dict[str, Any] | None:
    """The JSON object on ``line`` when it may be a lane message, else None (most lines: not parsed)."""
    if MARK not in line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if type(message) is dict else None


def request_line(request_id: str, method: str, params_json: str) -> bytes:
    head = f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":{json.dumps(method)}'
    return f'{head},"params":{params_json}}}\n'.encode()


def result_line(request_id: str, result_json: str) -> str:
    return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{result_json}}}\n'


def error_line(request_id: str, code: int, message: str, data: Any = None) -> str:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")) + "\n"


def cancel_line(request_id: str, reason: str) -> bytes:
    message = {"jsonrpc": "2.0", "method": CANCELLED, "params": {"requestId": request_id, "reason": reason}}
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()
