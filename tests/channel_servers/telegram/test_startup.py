"""A channel that cannot work says so at start, in one line naming the setting; the token is never shown."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from channel_servers.telegram.settings import SettingsError, load_settings
from tests.channel_servers.support import start_alone
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import TOKEN, FakeTelegram

pytestmark = pytest.mark.anyio

ANA = 5550001
WRONG_TOKEN = "654321:AAHwrongTokenWrongTokenWrongToken0"


@pytest.mark.scenario
async def test_a_wrong_token_fails_the_start_with_one_line_naming_the_variable(tmp_path: Path) -> None:
    fake = FakeTelegram()
    async with fake.serve() as base_url:
        done = await start_alone(
            "channel_servers.telegram",
            tmp_path,
            {
                "NEXO_TELEGRAM_BOT_TOKEN": WRONG_TOKEN,
                "NEXO_TELEGRAM_API_BASE_URL": base_url,
            },
        )
    stderr = done.stderr.decode()
    assert done.returncode == 1
    assert stderr.strip().splitlines() == [
        "channel_servers.telegram: Telegram refused the bot token (Unauthorized): set "
        "NEXO_TELEGRAM_BOT_TOKEN to the token @BotFather gave (/token), then restart"
    ]
    assert WRONG_TOKEN.split(":")[1] not in stderr


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({}, "NEXO_TELEGRAM_BOT_TOKEN: is not set (the token from @BotFather)"),
        (
            {"NEXO_TELEGRAM_BOT_TOKEN": "not-a-token"},
            "NEXO_TELEGRAM_BOT_TOKEN: NEXO_TELEGRAM_BOT_TOKEN does not look like a bot token",
        ),
        (
            {"NEXO_TELEGRAM_BOT_TOKEN": TOKEN, "NEXO_TELEGRAM_MODE": "webhook"},
            "mode webhook needs NEXO_TELEGRAM_WEBHOOK_URL",
        ),
        (
            {
                "NEXO_TELEGRAM_BOT_TOKEN": TOKEN,
                "NEXO_TELEGRAM_MODE": "webhook",
                "NEXO_TELEGRAM_WEBHOOK_URL": "https://bot.example/telegram",
                "NEXO_TELEGRAM_WEBHOOK_SECRET": "short",
            },
            "mode webhook needs NEXO_TELEGRAM_WEBHOOK_SECRET",
        ),
    ],
)
def test_bad_settings_are_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], problem: str
) -> None:
    for key in [key for key in os.environ if key.startswith("NEXO_")]:
        monkeypatch.delenv(key)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert str(raised.value).startswith(problem)
    assert "\n" not in str(raised.value)
    assert TOKEN.split(":")[1] not in str(raised.value)


async def test_the_token_appears_in_no_log_line_even_when_requests_fail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.fail_next("sendMessage", 502, "Bad Gateway", times=1)
    caplog.set_level(logging.DEBUG)
    # The HTTP client's own level too: a CLI test run earlier in this process may have set it to WARNING.
    caplog.set_level(logging.DEBUG, logger="httpx2")
    async with telegram_channel(tmp_path, fake) as running:
        sent = await running.client.call_tool("send_message", {"text": "hi", "chat_id": str(ANA)})
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "telegram sendMessage: retrying" in logged
    assert "/bot<token>/" in logged  # the HTTP client's request lines, scrubbed
    assert TOKEN.split(":")[1] not in logged
    assert sent.structured_content is not None
    assert sent.structured_content["status"] == "sent"
