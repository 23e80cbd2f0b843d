"""Button prompts: shown in each approval chat that takes them, updated once when the host settles them."""

from __future__ import annotations

import logging

import pytest

from shared.channelkit import PromptClosed, SendFailed, Unreachable
from shared.channelkit.buttons import ButtonPrompts
from shared.protocol.channel import PermissionRequestParams

pytestmark = pytest.mark.anyio

PROMPT = PermissionRequestParams(
    request_id="kmpqr",
    tool_name="workspace__write_file",
    description="Write a file",
    input_preview='{"path": "notes.md"}',
)
LOGGER = logging.getLogger("nexo.buttontest")
UNCONFIGURED = "set NEXO_TEST_APPROVAL_CHAT_IDS to approve from the test platform"


class Platform:
    """Posts and updates as a platform's API would: a message id per post, failures for some chats."""

    def __init__(self, skip: frozenset[str] = frozenset()) -> None:
        self.refuse: set[str] = set()
        self.skip = skip
        self.posted: list[tuple[str, str]] = []
        self.updated: list[tuple[str, str, str | None]] = []

    async def post(self, chat_id: str, params: PermissionRequestParams) -> str | None:
        if chat_id in self.refuse:
            raise SendFailed(f"chat {chat_id} refused the prompt")
        if chat_id in self.skip:
            return None
        self.posted.append((chat_id, params.request_id))
        return f"m{len(self.posted)}"

    async def update(self, chat_id: str, message_id: str, closed: PromptClosed) -> None:
        if chat_id in self.refuse:
            raise Unreachable(f"chat {chat_id} is unreachable")
        self.updated.append((chat_id, message_id, closed.outcome))


def prompts(platform: Platform, chat_ids: list[str]) -> ButtonPrompts:
    return ButtonPrompts(chat_ids, platform.post, platform.update, logger=LOGGER, unconfigured=UNCONFIGURED)


def closing() -> PromptClosed:
    return PromptClosed(request_id="kmpqr", outcome="allowed", decided_by="console", params=PROMPT)


async def test_without_approval_chats_the_operator_is_told_which_setting_to_fill(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = Platform()
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        shown = await prompts(platform, []).show(PROMPT)
    assert shown == 0
    assert [record.getMessage() for record in caplog.records] == [
        f"permission prompt kmpqr not shown: {UNCONFIGURED}"
    ]
    assert platform.posted == []


async def test_a_prompt_counts_only_the_chats_that_showed_it_and_each_is_updated_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = Platform(skip=frozenset({"c3"}))
    buttons = prompts(platform, ["c1", "c2", "c3"])
    platform.refuse = {"c2"}
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        shown = await buttons.show(PROMPT)
    assert shown == 1
    assert buttons.shown == {"kmpqr": [("c1", "m1")]}
    assert [record.getMessage() for record in caplog.records] == [
        "prompt kmpqr not shown in chat c2: chat c2 refused the prompt"
    ]
    await buttons.closed(closing())
    await buttons.closed(closing())
    assert platform.updated == [("c1", "m1", "allowed")]
    assert buttons.shown == {}


async def test_a_failed_update_is_logged_and_the_other_chats_are_still_updated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = Platform()
    buttons = prompts(platform, ["c1", "c2"])
    assert await buttons.show(PROMPT) == 2
    platform.refuse = {"c1"}
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        await buttons.closed(closing())
    assert platform.updated == [("c2", "m2", "allowed")]
    assert [record.getMessage() for record in caplog.records] == [
        "prompt kmpqr in chat c1 not updated: chat c1 is unreachable"
    ]
