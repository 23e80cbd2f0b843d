"""An approval prompt shows the whole call and whose request it is; nothing is silently cut.

The relay corpus: padded and disguised command lines (blanks, newlines, invisible and bidi
characters, sheer length) each hiding a tail command. Every prompt must show the tail, contain no
character a screen does not show as itself, and fit the prompt limit; the counts are printed.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from typing import Any, cast

import anyio
import pytest

from orchestrator.mesh import CatalogTool, ServerConnection
from orchestrator.permissions import ApprovalBroker, PolicyEngine, PolicyGate, approval_preview, origin_line
from orchestrator.permissions.preview import PROMPT_PREVIEW_CHARS
from shared.protocol.permission_prompts import PermissionPrompt, PermissionRequestAccepted

TAIL = "; touch hidden_tail"
SHELL = CatalogTool(  # noqa: S604 -- a catalog flag, no subprocess
    "sh", "run", "sh__run", "Run a shell command", {}, read_only=False, destructive=False, shell=True
)


def test_padding_cannot_push_the_tail_out_of_the_prompt() -> None:
    command = "ls" + " " * 400 + TAIL
    assert (
        approval_preview({"command": command}) == '{"command":"ls\u27e8400 spaces\u27e9; touch hidden_tail"}'
    )


def test_control_and_invisible_characters_are_escaped_and_runs_counted() -> None:
    command = "ls\u200b\u202e" + "\n" * 5 + "\t; x" + "\u00a0" * 4 + "y \x7f\x85"
    assert approval_preview({"command": command}) == (
        '{"command":"ls\\u200b\\u202e\u27e85 x \\n\u27e9\\t; x\u27e84 x \\u00a0\u27e9y \\u007f\\u0085"}'
    )


def test_an_input_too_long_for_a_prompt_shows_head_and_tail_and_says_how_much_is_hidden() -> None:
    command = "a" * 5000 + TAIL
    preview = approval_preview({"command": command})
    whole = json.dumps({"command": command}, separators=(",", ":"))
    head, tail = PROMPT_PREVIEW_CHARS - PROMPT_PREVIEW_CHARS // 3, PROMPT_PREVIEW_CHARS // 3
    hidden = len(whole) - head - tail
    assert preview == (
        f"{whole[:head]} \u27e8... {hidden} characters not shown: the input is too long for one prompt; "
        f"deny it unless you know what it does ...\u27e9 {whole[-tail:]}"
    )
    assert preview.endswith(TAIL + '"}')


def test_the_origin_names_the_chat_the_sender_and_the_role() -> None:
    meta = {"chat_id": "tab-1", "user_id": "alice\u202e-1"}
    assert origin_line("sample", meta, "contact") == 'sample chat "tab-1", sender "alice\\u202e-1" (contact)'
    assert origin_line(None, {}, "owner") == (
        "not from a chat (a goal started by the operator or the agent itself)"
    )


_PADDINGS: dict[str, Any] = {
    "spaces": lambda n: " " * n,
    "tabs": lambda n: "\t" * n,
    "newlines": lambda n: "\n" * n,
    "carriage returns": lambda n: "\r" * n,
    "no-break spaces": lambda n: "\u00a0" * n,
    "ideographic spaces": lambda n: "\u3000" * n,
    "zero-width spaces": lambda n: "\u200b" * n,
    "bidi overrides": lambda n: "\u202e\u202d" * (n // 2),
    "line separators": lambda n: "\u2028" * n,
    "escape sequences": lambda n: "\x1b[8m" * (n // 4),
    "mixed blanks": lambda n: " \t\n\u00a0" * (n // 4),
    "letters": lambda n: "x" * n,
}
_LENGTHS = (50, 199, 200, 201, 1000, 2999, 3000, 5000, 20_000)
_HEADS = ("ls", "git status", "cat README.md", "echo ok")


def _relay_corpus() -> list[tuple[str, str]]:
    return [
        (name, head + pad(n) + TAIL) for name, pad in _PADDINGS.items() for n in _LENGTHS for head in _HEADS
    ]


def _invisible(preview: str) -> list[str]:
    return [
        c
        for c in preview
        if c != " " and unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Cn"}
    ]


def test_the_relay_corpus_shows_every_tail_with_nothing_invisible_within_the_limit() -> None:
    corpus = _relay_corpus()
    limit = PROMPT_PREVIEW_CHARS + 200  # the hidden-length marker
    failures = Counter[str]()
    cut = 0
    for name, command in corpus:
        preview = approval_preview({"command": command})
        cut += "characters not shown" in preview
        if TAIL not in preview or _invisible(preview) or len(preview) > limit:
            failures[name] += 1
    print(
        f"relay corpus: {len(corpus)} padded prompts ({len(_PADDINGS)} paddings x {len(_LENGTHS)} lengths x "
        f"{len(_HEADS)} commands), {cut} shown as head and tail, failures {dict(failures) or 0}"
    )
    assert failures == Counter()
    assert len(corpus) >= 400


class _Relay:
    name = "console"

    def __init__(self) -> None:
        self.prompts: list[PermissionPrompt] = []
        self.shown = anyio.Event()

    async def request(self, request: Any, result_type: type, *, timeout: float) -> PermissionRequestAccepted:
        self.prompts.append(request.params)
        self.shown.set()
        return PermissionRequestAccepted(delivered=1)


@pytest.mark.anyio
async def test_a_prompt_raised_while_serving_a_contact_says_whose_request_it_is() -> None:
    broker = ApprovalBroker(timeout_s=5)
    relay = _Relay()
    origin = origin_line("sample", {"chat_id": "tab-1", "user_id": "alice-1"}, "contact")
    gate = PolicyGate(broker, lambda: cast(list[ServerConnection], [relay]), PolicyEngine()).for_origin(
        origin
    )
    command = "ls" + " " * 300 + TAIL
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.for_turn(False).check, SHELL, {"command": command}, "call-1")
            await relay.shown.wait()
            broker.resolve(relay.prompts[0].request_id, "deny", "channel:console")
    prompt = relay.prompts[0]
    assert (prompt.description, prompt.input_preview) == (
        'for sample chat "tab-1", sender "alice-1" (contact): Run a shell command',
        '{"command":"ls\u27e8300 spaces\u27e9; touch hidden_tail"}',
    )
