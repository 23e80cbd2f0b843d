"""A Slack channel that cannot work says so at start, in one line naming the setting; tokens are
never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from channel_servers.slack.settings import SettingsError, load_settings
from tests.channel_servers.support import start_alone
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack

pytestmark = pytest.mark.anyio

WRONG_BOT = "xoxb-9999-9999-wrongBotTokenForTests"
WRONG_APP = "xapp-1-A999-9999-wrongAppTokenForTests"


@pytest.mark.scenario
@pytest.mark.parametrize(
    ("bot", "app", "line"),
    [
        (
            WRONG_BOT,
            APP_TOKEN,
            "channel_servers.slack: Slack refused the bot token (invalid_auth): set NEXO_SLACK_BOT_TOKEN "
            "to the Bot User OAuth Token (xoxb-) of your app, then restart `nexo run`",
        ),
        (
            BOT_TOKEN,
            WRONG_APP,
            "channel_servers.slack: Slack refused the app-level token (invalid_auth): set "
            "NEXO_SLACK_APP_TOKEN to an app-level token (xapp-) with the scope connections:write, then "
            "restart `nexo run`",
        ),
    ],
)
async def test_a_wrong_token_fails_the_start_with_one_line_naming_the_variable(
    tmp_path: Path, bot: str, app: str, line: str
) -> None:
    fake = FakeSlack()
    async with fake.serve() as base_url:
        done = await start_alone(
            "channel_servers.slack",
            tmp_path,
            {
                "NEXO_SLACK_BOT_TOKEN": bot,
                "NEXO_SLACK_APP_TOKEN": app,
                "NEXO_SLACK_API_BASE_URL": base_url,
            },
        )
    stderr = done.stderr.decode()
    assert done.returncode == 1
    assert stderr.strip().splitlines() == [line]
    assert bot not in stderr
    assert app not in stderr


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({}, "NEXO_SLACK_BOT_TOKEN: is not set"),
        (
            {"NEXO_SLACK_BOT_TOKEN": "xoxp-user-token"},
            "NEXO_SLACK_BOT_TOKEN: is not a bot token (it starts with xoxb-)",
        ),
        ({"NEXO_SLACK_BOT_TOKEN": BOT_TOKEN}, "mode socket needs NEXO_SLACK_APP_TOKEN"),
        (
            {"NEXO_SLACK_BOT_TOKEN": BOT_TOKEN, "NEXO_SLACK_MODE": "events"},
            "mode events needs NEXO_SLACK_SIGNING_SECRET",
        ),
        (
            {
                "NEXO_SLACK_BOT_TOKEN": BOT_TOKEN,
                "NEXO_SLACK_APP_TOKEN": APP_TOKEN,
                "NEXO_SLACK_APPROVAL_CHANNEL_IDS": '["general"]',
            },
            "NEXO_SLACK_APPROVAL_CHANNEL_IDS: 'general' is not a Slack channel id",
        ),
        (
            {
                "NEXO_SLACK_BOT_TOKEN": BOT_TOKEN,
                "NEXO_SLACK_APP_TOKEN": APP_TOKEN,
                "NEXO_SLACK_API_BASE_URL": "slack.com/api",
            },
            "NEXO_SLACK_API_BASE_URL: 'slack.com/api' must start with https://",
        ),
    ],
)
def test_bad_settings_name_the_variable_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], problem: str
) -> None:
    for key in list(os.environ):
        if key.startswith("NEXO_SLACK_"):
            monkeypatch.delenv(key)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert problem in str(raised.value)
    assert BOT_TOKEN not in str(raised.value)
