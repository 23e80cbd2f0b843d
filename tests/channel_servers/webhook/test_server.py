"""The webhook server through the MCP protocol in memory: durable events, dedupe, tools, configuration."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp.client import ClientExtension, NotificationBinding
from mcp_types import ToolAnnotations

from channel_servers.webhook.receiver import Delivery
from channel_servers.webhook.server import build_server, main, render_content
from channel_servers.webhook.settings import WebhookSettings
from channel_servers.webhook.sources import SourcesError, load_sources
from channel_servers.webhook.verify import SCHEMES
from shared.protocol.channel import MAX_CONTENT_CHARS, ChannelParams, normalize_inbound
from tests.channel_servers.webhook.conftest import (
    ENV,
    NAMES,
    SOURCES,
    START,
    ManualClock,
    body_for,
    connected,
    sign,
)
from tests.mesh.harness import REPO

pytestmark = pytest.mark.anyio


def expected_params(name: str, delivery: str, kind: str | None, body: bytes) -> dict[str, Any]:
    chat_id = "billing" if name == "standard" else name
    meta: dict[str, str | None] = {
        "chat_id": chat_id,
        "source": name,
        "event_kind": kind,
        "delivery_id": delivery,
        "message_id": delivery,
    }
    content = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    return normalize_inbound(content, meta).model_dump(mode="json")


def db_rows(settings: WebhookSettings, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(settings.database)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_the_server_offers_send_message_and_list_sources_with_annotations(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as hooks:
        tools = (await hooks.client.list_tools()).tools
    hints = {"destructive_hint": False, "open_world_hint": False}
    # Only a send_message that carries an idempotency_key records once when repeated.
    assert [(tool.name, tool.annotations) for tool in tools] == [
        ("send_message", ToolAnnotations(read_only_hint=False, idempotent_hint=False, **hints)),
        ("list_sources", ToolAnnotations(read_only_hint=True, idempotent_hint=True, **hints)),
    ]


async def test_each_delivery_sent_one_to_five_times_at_once_is_stored_exactly_once(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    statuses: dict[str, list[int]] = {}
    expected: dict[str, dict[str, Any]] = {}
    kinds: dict[str, str | None] = {"github": "issues", "stripe": "invoice.paid", "slack": "app_mention"}
    kinds |= {"standard": "user.created", "ci": "build.failed", "legacy": None, "alerts": "disk"}
    async with connected(settings, clock) as hooks:
        for name in NAMES:
            for times in range(1, 6):
                delivery = f"{name}-{times}"
                body = body_for(name, delivery, note=str(times))
                key = f"webhook:{name}:{delivery}"
                expected[key] = expected_params(name, delivery, kinds[name], body)
                statuses[key] = []

                async def send(
                    attempt: int, name: str = name, delivery: str = delivery, body: bytes = body
                ) -> None:
                    # A provider's retry signs again with a fresh timestamp; the delivery id stays.
                    headers = sign(name, body, delivery, START + attempt)
                    response = await hooks.post(name, body, headers)
                    statuses[f"webhook:{name}:{delivery}"].append(response.status_code)

                async with anyio.create_task_group() as tg:
                    for attempt in range(times):
                        tg.start_soon(send, attempt)
        events = await hooks.events()
    assert {event.dedupe_key: event.payload for event in events} == expected
    assert len(events) == len(expected) == 35
    assert {key: sorted(codes) for key, codes in statuses.items()} == {
        key: [200] * (int(key.rsplit("-", 1)[1]) - 1) + [202] for key in expected
    }


async def test_a_replayed_delivery_id_with_another_body_is_409_and_the_first_body_stays(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as hooks:
        replies = []
        for name in NAMES:
            original = body_for(name, f"{name}-1", note="original")
            changed = body_for(name, f"{name}-1", note="changed")
            first = await hooks.post(name, original, sign(name, original, f"{name}-1", START))
            replay = await hooks.post(name, changed, sign(name, changed, f"{name}-1", START + 1))
            replies.append((first.status_code, replay.status_code, replay.json()))
        events = await hooks.events()
    conflict = {"error": "delivery id already received with a different body"}
    # The hmac-sha1 source takes its id from the body; the others from a header or a signed field.
    assert replies == [(202, 409, conflict)] * len(NAMES)
    assert [
        ("original", "changed" in event.payload["content"])
        for event in events
        if "original" in event.payload["content"]
    ] == [("original", False)] * len(NAMES)


async def test_a_github_body_replayed_under_a_new_delivery_header_is_a_duplicate(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    body = body_for("github", "g-1")
    async with connected(settings, clock) as hooks:
        first = await hooks.post("github", body, sign("github", body, "g-1", START))
        replay = await hooks.post("github", body, sign("github", body, "g-forged", START))
        events = await hooks.events()
    assert (first.status_code, replay.status_code, replay.json()) == (
        202,
        200,
        {"duplicate": True, "delivery_id": "g-forged"},
    )
    assert [event.dedupe_key for event in events] == ["webhook:github:g-1"]


async def test_a_full_inbox_answers_503_until_the_orchestrator_acknowledges(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = WebhookSettings(state_dir=tmp_path, sources=SOURCES, port=0, max_pending=1)
    first_body, second_body = body_for("alerts", "a-1"), body_for("alerts", "a-2", note="2")
    async with connected(settings, clock) as hooks:
        first = await hooks.post("alerts", first_body, sign("alerts", first_body, "a-1", START))
        full = await hooks.post("alerts", second_body, sign("alerts", second_body, "a-2", START))
        [event] = await hooks.events()
        acked = await hooks.ack([event.seq])
        retried = await hooks.post("alerts", second_body, sign("alerts", second_body, "a-2", START))
        after = await hooks.pull(after=event.seq)
    assert (first.status_code, full.status_code, full.headers["retry-after"], acked) == (202, 503, "60", 1)
    assert full.json() == {"error": "the agent's inbox is full; retry later"}
    assert (retried.status_code, [e.dedupe_key for e in after.events], after.pending) == (
        202,
        ["webhook:alerts:a-2"],
        1,
    )


class Pushed(ClientExtension):
    identifier = "nexo/channel"

    def __init__(self, last: str) -> None:
        self.received: list[ChannelParams] = []
        self.last = last
        self.arrived = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [
            NotificationBinding(
                method="notifications/nexo/channel", params_type=ChannelParams, handler=self._on
            )
        ]

    async def _on(self, params: ChannelParams) -> None:
        self.received.append(params)
        if params.meta.get("delivery_id") == self.last:
            self.arrived.set()


async def test_stored_events_are_pushed_to_live_sessions_and_duplicates_are_not(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    pushed = Pushed(last="c-2")
    first, second = body_for("ci", "c-1", note="1"), body_for("ci", "c-2", note="2")
    # The handshake era keeps a standing channel; the 2026-07-28 era has none, and relies on pull.
    async with connected(settings, clock, extensions=[pushed], mode="legacy") as hooks:
        await hooks.client.list_tools()  # a session is pushed to once it has spoken to the server
        await hooks.post("ci", first, sign("ci", first, "c-1", START))
        await hooks.post("ci", first, sign("ci", first, "c-1", START))
        await hooks.post("ci", second, sign("ci", second, "c-2", START))
        with anyio.fail_after(5):
            await pushed.arrived.wait()
        events = await hooks.events()
    received = {json.dumps(params.model_dump(mode="json"), sort_keys=True) for params in pushed.received}
    assert received == {json.dumps(event.payload, sort_keys=True) for event in events}
    assert [event.dedupe_key for event in events] == ["webhook:ci:c-1", "webhook:ci:c-2"]


async def test_send_message_records_the_reply_once_per_idempotency_key(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    args = {"text": "ack: investigating", "chat_id": "billing", "reply_to": "msg_1", "idempotency_key": "r-1"}
    async with connected(settings, clock) as hooks:
        first = await hooks.client.call_tool("send_message", args)
        again = await hooks.client.call_tool("send_message", {**args, "text": "changed"})
        unkeyed = await hooks.client.call_tool(
            "send_message", {"text": "fyi", "chat_id": "ci", "notice": True}
        )
    assert (first.structured_content, again.structured_content, unkeyed.structured_content) == (
        {"status": "recorded", "message_id": "1", "duplicate": False},
        {"status": "recorded", "message_id": "1", "duplicate": True},
        {"status": "recorded", "message_id": "2", "duplicate": False},
    )
    rows = db_rows(settings, "SELECT chat_id, text, reply_to, status, notice FROM outbox ORDER BY id")
    assert rows == [("billing", "ack: investigating", "msg_1", "sent", 0), ("ci", "fyi", None, "sent", 1)]


async def test_send_message_refuses_an_unknown_chat_id_or_empty_text_with_a_fix(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as hooks:
        unknown = await hooks.client.call_tool("send_message", {"text": "hi", "chat_id": "operator"})
        empty = await hooks.client.call_tool("send_message", {"text": "  ", "chat_id": "ci"})
    texts = [getattr(block, "text", "") for result in (unknown, empty) for block in result.content]
    assert (unknown.is_error, empty.is_error) == (True, True)
    assert texts == [
        "Error executing tool send_message: unknown chat_id 'operator': expected one of 'alerts', "
        "'billing', 'ci', 'github', 'legacy', 'slack', 'stripe' (the chat_id of the event you are answering)",
        "Error executing tool send_message: text is empty; pass the reply to record",
    ]


async def test_list_sources_names_each_source_and_its_url(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as hooks:
        result = await hooks.client.call_tool("list_sources", {})
    assert result.structured_content == {
        "listening": "http://webhook.test",
        "sources": [
            {
                "name": entry["name"],
                "scheme": entry["scheme"],
                "chat_id": entry.get("chat_id", entry["name"]),
                "url": f"http://webhook.test{entry['path']}",
            }
            for entry in SOURCES
        ],
    }


def delivery_of(body: bytes, document: Any) -> Delivery:
    [source] = load_sources(SOURCES[:1], None, ENV)
    return Delivery(source, "d", None, body, document, "digest")


def test_content_is_pretty_json_or_compact_json_when_pretty_would_not_fit() -> None:
    small = {"a": {"b": [1, 2]}, "text": "héllo"}
    large = {"rows": [[i, i] for i in range(1500)]}
    pretty_large = json.dumps(large, indent=2)
    compact_large = json.dumps(large, separators=(",", ":"))
    assert len(pretty_large) > MAX_CONTENT_CHARS >= len(compact_large)
    assert render_content(delivery_of(b"", small)) == json.dumps(small, indent=2, ensure_ascii=False)
    assert render_content(delivery_of(b"", large)) == compact_large


def test_content_of_a_non_json_body_is_its_text_and_an_empty_body_says_so() -> None:
    assert render_content(delivery_of(b"disk \xff full", None)) == "disk \ufffd full"
    assert render_content(delivery_of(b"", None)) == "(empty body)"


async def test_a_payload_over_the_contracts_cap_is_cut_with_an_ellipsis(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    body = json.dumps({"log": "x" * 40_000}).encode()
    async with connected(settings, clock) as hooks:
        await hooks.post("alerts", body, sign("alerts", body, "big", START))
        [event] = await hooks.events()
    content = event.payload["content"]
    assert (len(content), content[:10], content[-1]) == (MAX_CONTENT_CHARS, '{"log":"xx', "…")


def configured(entries: list[dict[str, Any]], environ: dict[str, str] | None = None, **settings: Any) -> str:
    with pytest.raises(SourcesError) as caught:
        build_server(
            WebhookSettings(sources=entries, **settings), environ=ENV if environ is None else environ
        )
    return str(caught.value)


GITHUB = SOURCES[0]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{**GITHUB, "scheme": "sha512"}],
            "webhook source 'github': key 'scheme': Input should be 'hmac-sha256'",
        ),
        (
            [{**GITHUB, "secret": "x"}],
            "webhook source 'github': key 'secret': secrets never come from the sources",
        ),
        ([{**GITHUB, "path": "hooks"}], "webhook source 'github': key 'path': String should match pattern"),
        (
            [{**GITHUB, "colour": "red"}],
            "webhook source 'github': key 'colour': Extra inputs are not permitted",
        ),
        ([{"path": "/x"}], "webhook source #1: key 'name': Field required"),
        (["github"], "webhook source #1: expected a mapping of keys"),
        (
            [{**GITHUB, "signature_header": "X-Sig"}],
            "webhook source 'github': scheme github has fixed headers: remove signature_header",
        ),
        (
            [{**SOURCES[4], "signature_header": None}],
            "webhook source 'ci': scheme hmac-sha256 needs signature_header (e.g. X-Signature)",
        ),
        (
            [{**GITHUB, "delivery_id": "$.a b"}],
            "webhook source 'github': '$.a b' is neither a header name nor a JSON path like $.data.id",
        ),
        (
            [GITHUB, {**SOURCES[1], "path": "/hooks/github"}],
            "webhook source 'stripe': key 'path': '/hooks/github' is used",
        ),
        (
            [GITHUB, {**SOURCES[1], "name": "github"}],
            "webhook source 'github': key 'name': 'github' is used twice",
        ),
        ([], "no webhook sources are configured: list them in a file named by NEXO_WEBHOOK_SOURCES_FILE"),
    ],
)
def test_a_bad_source_is_refused_at_start_naming_the_source_and_key(entries: list[Any], message: str) -> None:
    assert configured(entries).startswith(message)


def test_a_source_whose_secret_variable_is_unset_or_unusable_is_refused_naming_the_variable() -> None:
    unset = configured([GITHUB], {})
    unusable = configured([SOURCES[3]], {"STANDARD_SECRET": "plain"})
    assert unset.startswith(
        "webhook source 'github': key 'secret_env': the environment variable GITHUB_SECRET is empty or "
        "not set; export it with the source's github secret"
    )
    assert unusable == (
        "webhook source 'standard': key 'secret_env': the secret in STANDARD_SECRET is unusable: "
        "a Standard Webhooks secret starts with 'whsec_'"
    )
    assert "It's a Secret" not in unset + unusable


def test_sources_come_from_a_yaml_file_as_a_list_or_under_a_sources_key(tmp_path: Path) -> None:
    listed, keyed = tmp_path / "list.yaml", tmp_path / "keyed.json"
    listed.write_text("- name: gh\n  path: /gh\n  scheme: github\n  secret_env: GITHUB_SECRET\n")
    keyed.write_text(json.dumps({"sources": SOURCES}))
    from_list = load_sources(None, listed, ENV)
    from_keyed = load_sources(None, keyed, ENV)
    assert [(s.name, s.path, s.chat_id) for s in from_list] == [("gh", "/gh", "gh")]
    assert [s.name for s in from_keyed] == list(NAMES)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the file (No such file or directory); check the path"),
        ("sources: [unclosed", "not valid YAML or JSON"),
        ("name: github", "expected a list of sources, or a mapping with the single key 'sources'"),
    ],
)
def test_an_unreadable_or_malformed_sources_file_is_refused_naming_it(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "sources.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SourcesError) as caught:
        load_sources(None, path, ENV)
    assert str(caught.value).startswith(f"NEXO_WEBHOOK_SOURCES_FILE={path}: {message}")


def test_setting_both_the_file_and_the_json_is_refused(tmp_path: Path) -> None:
    message = configured(SOURCES, sources_file=tmp_path / "sources.yaml")
    assert message == "both NEXO_WEBHOOK_SOURCES and NEXO_WEBHOOK_SOURCES_FILE are set; keep only one of them"


def test_main_exits_1_with_the_problem_on_stderr_when_no_source_is_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("NEXO_WEBHOOK_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("NEXO_WEBHOOK_SOURCES", raising=False)
    monkeypatch.delenv("NEXO_WEBHOOK_SOURCES_FILE", raising=False)
    monkeypatch.setattr("sys.argv", ["webhook"])
    assert main() == 1
    assert capsys.readouterr().err.startswith(
        "channel_servers.webhook: no webhook sources are configured: list them in a file named by "
        "NEXO_WEBHOOK_SOURCES_FILE"
    )


def test_the_sources_examples_in_the_docs_are_valid_and_cover_every_scheme(tmp_path: Path) -> None:
    text = (REPO / "docs" / "webhooks.md").read_text()
    blocks = [
        textwrap.dedent(block) for block in re.findall(r"```yaml\n( *sources:\n.*?)```", text, re.DOTALL)
    ]
    schemes = []
    for index, block in enumerate(blocks):
        path = tmp_path / f"example-{index}.yaml"
        path.write_text(block)
        # A Standard Webhooks secret is the strictest form, and any scheme accepts it.
        environ = {entry["secret_env"]: "whsec_c2VjcmV0" for entry in yaml.safe_load(block)["sources"]}
        schemes.append(sorted(source.config.scheme for source in load_sources(None, path, environ)))
    assert schemes == [["github"], sorted(SCHEMES)]
