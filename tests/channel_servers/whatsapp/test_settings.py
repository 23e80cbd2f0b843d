"""The WhatsApp channel's settings: every problem named by its environment variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from channel_servers.whatsapp.settings import SettingsProblem, load_settings

REQUIRED = {
    "NEXO_WHATSAPP_ACCESS_TOKEN": "EAAsecret-token",
    "NEXO_WHATSAPP_APP_SECRET": "app-secret",
    "NEXO_WHATSAPP_VERIFY_TOKEN": "verify",
    "NEXO_WHATSAPP_PHONE_NUMBER_ID": "106540352242922",
}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for variable in [*REQUIRED, "NEXO_WHATSAPP_APPROVAL_NUMBERS", "NEXO_WHATSAPP_API_VERSION"]:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NEXO_STATE_DIR", str(tmp_path))
    return monkeypatch


def test_missing_settings_are_named_by_their_variables(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("NEXO_WHATSAPP_APP_SECRET", "app-secret")
    with pytest.raises(SettingsProblem) as raised:
        load_settings()
    assert str(raised.value) == (
        "the WhatsApp channel is not configured: NEXO_WHATSAPP_ACCESS_TOKEN is not set; "
        "NEXO_WHATSAPP_VERIFY_TOKEN is not set; NEXO_WHATSAPP_PHONE_NUMBER_ID is not set "
        "(see docs/channels/whatsapp.md#settings)"
    )


def test_a_bad_value_is_named_and_no_secret_is_echoed(environment: pytest.MonkeyPatch) -> None:
    for variable, value in REQUIRED.items():
        environment.setenv(variable, value)
    environment.setenv("NEXO_WHATSAPP_APPROVAL_NUMBERS", '["+1 555 0100"]')
    environment.setenv("NEXO_WHATSAPP_API_VERSION", "21")
    with pytest.raises(SettingsProblem) as raised:
        load_settings()
    message = str(raised.value)
    assert "NEXO_WHATSAPP_API_VERSION: String should match pattern" in message
    assert (
        "NEXO_WHATSAPP_APPROVAL_NUMBERS: Value error, approval number '+1 555 0100' is not a wa_id" in message
    )
    assert "EAAsecret-token" not in message


def test_the_settings_load_from_the_environment(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable, value in REQUIRED.items():
        environment.setenv(variable, value)
    environment.setenv("NEXO_WHATSAPP_APPROVAL_NUMBERS", '["15550100"]')
    settings = load_settings()
    assert (settings.graph_url, settings.approval_numbers, settings.state_dir) == (
        "https://graph.facebook.com/v21.0",
        ["15550100"],
        tmp_path,
    )
    assert "EAAsecret-token" not in repr(settings)
