"""What an HTTP status on the MCP endpoint says about the connection.

The SDK turns any error status into one generic JSON-RPC error ("Server returned an error
response"), which hides that the server refused the token or is shutting down. The mesh reads the
status itself, on each response, and ends the connection with the reason: the supervisor then
reconnects with backoff, and ``nexo status`` and the log say what happened.
"""

from __future__ import annotations

import re

import httpx2

SESSION_HEADER = "mcp-session-id"
_ERROR = re.compile(r'error="([^"]*)"')


def refusal(response: httpx2.Response, *, token_origin: str) -> str | None:
    """Why this response ends the connection, or None when it does not."""
    status = response.status_code
    if status in (401, 403):
        challenge = _ERROR.search(response.headers.get("www-authenticate", ""))
        code = f"HTTP {status}{f', {challenge.group(1)}' if challenge else ''}"
        fix = (
            "put the server's token there and restart nexo (a nexo server names its token when it "
            "starts; see `nexo serve --help`)"
        )
        if "Authorization" not in response.request.headers:
            return (
                f"the server requires a bearer token and nexo sent none ({code}): {token_origin}. Fix: {fix}"
            )
        return f"the server refused the bearer token ({code}); nexo read it from {token_origin}. Fix: {fix}"
    if status >= 500:
        return f"the server answered HTTP {status} (it is stopping or failed); reconnecting"
    if status == 404 and SESSION_HEADER in response.request.headers:
        return "the server no longer knows this session (HTTP 404: it restarted); reconnecting"
    return None
