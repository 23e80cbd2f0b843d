"""The model's channel tools: look at the agent's channels and send through them.

``channel_list`` and ``channel_status`` only read. ``send_user_message`` (to the operator) and
``notify_origin`` (to the chat the goal came from) stay inside conversations nexo is already in, so
they run unasked. ``channel_send`` and ``notify_channel`` can reach anyone on a channel: they go
through the permission gate. Every send carries an idempotency key derived from the goal and the
message, so a retried goal never sends twice. No send may imitate an approval prompt, and a message
to the operator from a goal serving a contact says so (``impersonation``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.intake.gate import channel_servers
from orchestrator.intake.outbound import ReplySender, notify
from orchestrator.tools.impersonation import labelled_for_operator, refuse_prompt_lookalike
from orchestrator.tools.local import GoalContext, LocalTool, LocalToolError
from shared.protocol.channel import MAX_CONTENT_CHARS

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake

_CONTENT = {
    "type": "string",
    "description": "the message text",
    "minLength": 1,
    "maxLength": MAX_CONTENT_CHARS,
}


def _key(context: GoalContext, tool: str, *parts: object) -> str:
    digest = hashlib.sha256(json.dumps([tool, *parts], sort_keys=True, default=str).encode()).hexdigest()
    return f"tool:{context.goal_id}:{digest[:16]}"


def _content(arguments: Mapping[str, Any]) -> str:
    content = arguments.get("content")
    if not isinstance(content, str) or not content.strip():
        raise LocalToolError(f"content must be non-empty text; got {content!r}")
    if len(content) > MAX_CONTENT_CHARS:
        raise LocalToolError(f"content has {len(content)} characters; the limit is {MAX_CONTENT_CHARS}")
    return content


def _chat(value: object) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


def channel_tools(intake: Intake) -> list[LocalTool]:
    config, agent, mesh = intake.config, intake.agent, intake.mesh

    def checked(arguments: Mapping[str, Any]) -> str:
        content = _content(arguments)
        refuse_prompt_lookalike(content, intake.broker.open_requests)
        return content

    def bound_server(arguments: Mapping[str, Any]) -> str:
        server = arguments.get("server")
        if server not in agent.channels:
            raise LocalToolError(
                f"no channel {server!r} for this agent; use one of: {', '.join(agent.channels) or '(none)'} "
                "(channel_list shows them)"
            )
        return str(server)

    def sender(server: str) -> ReplySender:
        return ReplySender(mesh[server], config.channel(server).outbound_tool_name)

    async def channel_list(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        caps = {name: mesh[name].capability_names() for name in mesh.connections}
        rows = []
        for name in channel_servers(config, caps):
            if name not in agent.channels:
                continue
            verdict = intake.channel_gate(mesh[name])
            rows.append(
                {"server": name, "state": mesh[name].state, "taking_messages": verdict.verdict == "register"}
            )
        return json.dumps({"channels": rows})

    async def channel_status(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        server = bound_server(arguments)
        connection = mesh[server]
        verdict = intake.channel_gate(connection)
        return json.dumps(
            {
                "server": server,
                "state": connection.state,
                "last_error": connection.last_error,
                "taking_messages": verdict.verdict == "register",
                "gate": verdict.reason or "open",
                "outbound_tool": config.channel(server).outbound_tool_name,
            }
        )

    def send_checked(arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        server = bound_server(arguments)
        content = checked(arguments)
        extra = arguments.get("arguments") or {}
        if not isinstance(extra, dict):
            raise LocalToolError(f"arguments must be an object such as {{'chat_id': '...'}}; got {extra!r}")
        return server, content, extra

    def notice_checked(arguments: Mapping[str, Any]) -> tuple[str, str, str]:
        server = bound_server(arguments)
        content = checked(arguments)
        chat_id = arguments.get("chat_id")
        if not isinstance(chat_id, str) or not chat_id:
            raise LocalToolError(f"chat_id must name a chat on {server}; got {chat_id!r}")
        return server, content, chat_id

    async def channel_send(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        server, content, extra = send_checked(arguments)
        content = intake.secret_guard.screen(content, server=server, chat_id=_chat(extra.get("chat_id")))
        key = _key(context, "channel_send", server, content, extra)
        detail = await sender(server).call({**extra, "text": content, "idempotency_key": key})
        intake.traffic(f"channel:{server}", "out", str(extra.get("chat_id", "-")), "sent", None, len(content))
        return f"sent through {server}: {detail}"

    async def say(server: str, chat_id: str, content: str, key: str, status: str, *, notice: bool) -> None:
        content = intake.secret_guard.screen(content, server=server, chat_id=chat_id)
        await notify(mesh, config, server, chat_id, content, key=key, notice=notice)
        intake.traffic(f"channel:{server}", "out", chat_id or "-", status, None, len(content))

    async def notify_channel(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        server, content, chat_id = notice_checked(arguments)
        key = _key(context, "notify_channel", server, chat_id, content)
        await say(server, chat_id, content, key, "notice", notice=True)
        return f"notice sent to {chat_id} on {server}"

    async def notify_origin(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        content = checked(arguments)
        if context.origin_server is None:
            raise LocalToolError(
                "this goal did not come from a chat; use send_user_message to reach the operator"
            )
        key = _key(context, "notify_origin", content)
        chat_id = context.origin_meta.get("chat_id", "")
        await say(context.origin_server, chat_id, content, key, "notice", notice=True)
        return f"notice sent to the chat this goal came from ({context.origin_server})"

    async def send_user_message(context: GoalContext, arguments: Mapping[str, Any]) -> str:
        content = labelled_for_operator(context, checked(arguments))
        status = arguments.get("status", "normal")
        if status not in ("normal", "proactive"):
            raise LocalToolError(f"status must be 'normal' or 'proactive'; got {status!r}")
        operator = config.operator
        if mesh.get(operator.channel) is None:
            raise LocalToolError(
                f"the operator's channel {operator.channel!r} is not configured (operator.channel)"
            )
        key = _key(context, "send_user_message", content)
        await say(operator.channel, operator.chat_id, content, key, status, notice=False)
        return f"sent to the operator on {operator.channel}"

    server_param = {
        "type": "string",
        "description": "a channel server bound to this agent (see channel_list)",
    }
    return [
        LocalTool(
            "channel_list",
            "The channels this agent is bound to and whether each is taking messages.",
            {"type": "object", "properties": {}},
            channel_list,
            read_only=True,
        ),
        LocalTool(
            "channel_status",
            "One channel's connection state, last error and gate verdict.",
            {"type": "object", "properties": {"server": server_param}, "required": ["server"]},
            channel_status,
            read_only=True,
        ),
        LocalTool(
            "channel_send",
            "Send a message through a channel's outbound tool; `arguments` are passed to it (e.g. chat_id).",
            {
                "type": "object",
                "properties": {
                    "server": server_param,
                    "content": _CONTENT,
                    "arguments": {"type": "object", "description": "extra arguments of the outbound tool"},
                },
                "required": ["server", "content"],
            },
            channel_send,
            read_only=False,
            classification="outbound",
            precheck=send_checked,
        ),
        LocalTool(
            "notify_channel",
            "Send a short notice to a chat on a channel (shown as a status line, not as an answer).",
            {
                "type": "object",
                "properties": {"server": server_param, "chat_id": {"type": "string"}, "content": _CONTENT},
                "required": ["server", "chat_id", "content"],
            },
            notify_channel,
            read_only=False,
            classification="outbound",
            precheck=notice_checked,
        ),
        LocalTool(
            "notify_origin",
            "Send a short progress notice to the chat this goal came from, before the final answer.",
            {"type": "object", "properties": {"content": _CONTENT}, "required": ["content"]},
            notify_origin,
            read_only=True,
            classification="outbound",
            tier="safe",
        ),
        LocalTool(
            "send_user_message",
            "Send a message to the operator (status 'proactive' when nobody asked for it).",
            {
                "type": "object",
                "properties": {
                    "content": _CONTENT,
                    "status": {"type": "string", "enum": ["normal", "proactive"], "default": "normal"},
                },
                "required": ["content"],
            },
            send_user_message,
            read_only=True,
            classification="outbound",
            tier="safe",
        ),
    ]
