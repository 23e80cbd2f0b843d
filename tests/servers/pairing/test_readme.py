"""The server's README names every control method, setting, check reason and error code."""

from __future__ import annotations

from pathlib import Path

from servers.pairing.control import METHODS
from servers.pairing.settings import PairingSettings
from shared.protocol.pairing import CODE_INVALID, LOCKED_OUT, PENDING_NOT_FOUND, REASONS

README = (Path(__file__).resolve().parents[3] / "servers" / "pairing" / "README.md").read_text()


def test_every_method_is_documented() -> None:
    assert [method for method in METHODS if f"`{method}`" not in README] == []


def test_every_setting_is_documented_as_its_environment_variable() -> None:
    variables = [f"NEXO_PAIRING_{name.upper()}" for name in PairingSettings.model_fields]
    assert [variable for variable in variables if f"`{variable}`" not in README] == []


def test_every_check_reason_and_error_code_is_documented() -> None:
    assert [reason for reason in REASONS if f"`{reason}`" not in README] == []
    assert [code for code in (CODE_INVALID, LOCKED_OUT, PENDING_NOT_FOUND) if f"`{code}`" not in README] == []
