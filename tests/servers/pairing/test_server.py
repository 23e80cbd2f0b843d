"""Opening the pairing server's resources: settings, the code key file, the database."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from servers.pairing.errors import KeyFileError
from servers.pairing.server import load_or_create_key, open_store
from servers.pairing.settings import PairingSettings
from shared.protocol.pairing import CheckResult
from tests.servers.pairing.conftest import ManualClock, dm

pytestmark = pytest.mark.anyio


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NEXO_STATE_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("NEXO_PAIRING_MAX_PENDING", "5")
    monkeypatch.setenv("NEXO_PAIRING_CODE_TTL_S", "900")
    settings = PairingSettings()
    assert settings.database == tmp_path / "shared" / "pairing" / "pairing.db"
    assert settings.key_file == tmp_path / "shared" / "pairing" / "code.key"
    assert (settings.max_pending, settings.code_ttl_s, settings.lockout_failures) == (5, 900.0, 5)
    monkeypatch.setenv("NEXO_PAIRING_STATE_DIR", str(tmp_path / "own"))
    assert PairingSettings().database == tmp_path / "own" / "pairing" / "pairing.db"


async def test_the_key_and_database_are_private_to_the_user(settings: PairingSettings) -> None:
    async with open_store(settings, clock=ManualClock()) as store:
        await store.check(dm("111"))
    directory = settings.key_file.parent
    assert directory.stat().st_mode & 0o777 == 0o700
    assert settings.key_file.stat().st_mode & 0o777 == 0o600
    assert settings.database.stat().st_mode & 0o777 == 0o600
    assert len(settings.key_file.read_bytes()) == 32
    assert sorted(path.name for path in directory.iterdir() if path.name.startswith(".")) == []


async def test_the_key_survives_a_restart_so_a_pending_code_is_sent_again(settings: PairingSettings) -> None:
    clock = ManualClock()
    async with open_store(settings, clock=clock) as store:
        first = await store.check(dm("111"))
    key = settings.key_file.read_bytes()
    async with open_store(settings, clock=clock) as store:
        again = await store.check(dm("111"))
    conn = sqlite3.connect(settings.database)
    try:
        migrations = [name for (name,) in conn.execute("SELECT name FROM _migrations")]
    finally:
        conn.close()
    assert (again.reason, again.code, again.pending_id) == ("code_resent", first.code, first.pending_id)
    assert settings.key_file.read_bytes() == key
    assert migrations == ["pairing_0001_schema"]


async def test_a_replaced_key_fails_closed_for_codes_sealed_with_the_old_one(
    settings: PairingSettings, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    async with open_store(settings, clock=clock) as store:
        await store.check(dm("111"))
    settings.key_file.unlink()
    async with open_store(settings, clock=clock) as store:
        with caplog.at_level(logging.ERROR, logger="nexo.pairing"):
            result = await store.check(dm("111"))
        fresh = await store.check(dm("222"))
    assert result == CheckResult(verdict="drop", reason="storage_error")
    assert "does not decrypt with the current code.key" in caplog.records[0].getMessage()
    assert fresh.reason == "code_issued"


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "code.key"
    load_or_create_key(path)
    path.chmod(0o644)
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(path)
    assert str(caught.value) == f"{path} is readable by other users (mode 644); run `chmod 600 {path}`"


def test_a_key_file_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "code.key"
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(path)
    assert str(caught.value) == (
        f"{path} holds 5 bytes, not 32: restore it from a backup, or delete it to start a new key (codes "
        "issued so far can then no longer be approved)"
    )


def test_a_key_that_cannot_be_created_names_the_setting_to_change(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(blocker / "pairing" / "code.key")
    assert str(caught.value).startswith(f"{blocker / 'pairing' / 'code.key'}: cannot create or read")
    assert "NEXO_PAIRING_STATE_DIR (or NEXO_PAIRING_KEY_PATH)" in str(caught.value)
