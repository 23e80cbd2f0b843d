"""The act tier's ``channel_send`` and ``cron_create``: carried out by the running agent, under its checks.

Both go to the daemon's control socket (``send`` and ``cron_create``, see ``orchestrator/client_actions.py``):
the daemon checks the channel and the chat as it does for the agent's own sends, screens the text for
secrets, creates the schedule on the agent's binding, and records the call in the ledger under the
client's name. With no ``nexo run`` both are refused with the command that starts it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.models import CronChanged, Sent
from orchestrator.mcpserver.read_tools import AgentArg
from orchestrator.mcpserver.refusals import as_tool_errors
from shared.protocol import cron
from shared.protocol.channel import MAX_CONTENT_CHARS
from shared.protocol.policy import tool_hints

ServerArg = Annotated[
    str,
    Field(description="A channel server the agent is bound to, as channels_status lists it.", min_length=1),
]
ChatArg = Annotated[str, Field(description="The chat on that channel (its chat_id).", min_length=1)]


def client_name(ctx: Context[Any]) -> str | None:
    """The name the MCP client gave for itself (clientInfo), if it gave one."""
    params = ctx.session.client_params
    return None if params is None else params.client_info.name


def add_send_tools(mcp: MCPServer[Any], backend: Backend) -> None:
    @mcp.tool(title="Send a message on a channel", annotations=tool_hints(open_world=True))
    async def channel_send(
        server: ServerArg,
        chat_id: ChatArg,
        text: Annotated[
            str,
            Field(
                description="The message, as it should appear.", min_length=1, max_length=MAX_CONTENT_CHARS
            ),
        ],
        idempotency_key: Annotated[
            str | None,
            Field(
                description="Your name for this message: a retry with the same key is not sent again.",
                min_length=1,
                max_length=128,
            ),
        ] = None,
        agent: AgentArg = None,
        *,
        ctx: Context[Any],
    ) -> Sent:
        """Send a message through one of the agent's channels, to the operator's chat, a paired contact
        or a chat the operator allowed; secrets in the text are redacted (or the send is refused)."""
        request: dict[str, Any] = {
            "op": "send",
            "server": server,
            "chat_id": chat_id,
            "text": text,
            "idempotency_key": idempotency_key,
            "agent": agent,
            "client": client_name(ctx),
        }
        with as_tool_errors():
            answer = await backend.control_op(_present(request), "sending a message")
        return Sent.model_validate(answer)

    @mcp.tool(title="Schedule a prompt", annotations=tool_hints(open_world=True))
    async def cron_create(
        schedule: Annotated[
            str,
            Field(
                description=(
                    "When to run: a 5-field cron expression ('cron 0 9 * * mon-fri'), an interval "
                    "('every 2h') or one time ('once_after 20m', 'once_at 2026-12-01T09:00:00Z')."
                ),
                min_length=1,
                max_length=200,
            ),
        ],
        prompt: Annotated[
            str,
            Field(description="What the agent does at each fire, in words.", min_length=1, max_length=8000),
        ],
        channel: Annotated[
            str | None, Field(description="The channel the answer goes to; omit for the operator's.")
        ] = None,
        recipient: Annotated[
            str | None, Field(description="The chat on that channel; omit for the operator's chat.")
        ] = None,
        recurring: Annotated[bool, Field(description="false runs a repeating schedule once.")] = True,
        misfire: Annotated[
            Literal["park", "skip", "catch_up_once", "all"] | None,
            Field(description="What happens to runs missed while the agent was down (default park)."),
        ] = None,
        timezone: Annotated[
            str | None, Field(description="An IANA time zone for wall-clock times; omit for UTC.")
        ] = None,
        agent: AgentArg = None,
        *,
        ctx: Context[Any],
    ) -> CronChanged:
        """Have the agent run a prompt on a schedule, as its own cron entry (pause, resume or delete it
        with the other cron tools); its answer goes to the operator or to a chat the agent may reach."""
        request: dict[str, Any] = {
            "op": "cron_create",
            "schedule": schedule,
            "prompt": prompt,
            "channel": channel,
            "recipient": recipient,
            "recurring": recurring,
            "misfire": misfire,
            "timezone": timezone,
            "agent": agent,
            "client": client_name(ctx),
        }
        with as_tool_errors():
            answer = await backend.control_op(_present(request), "scheduling a prompt")
        return CronChanged(entry=cron.Entry.model_validate(answer["entry"]))


def _present(request: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in request.items() if value is not None}
