"""`nexo pair approve` with a mistyped code: refused at once, no server asked, no lockout counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.main import main
from tests.mesh.harness import python_server, write_config


def test_a_malformed_code_is_refused_before_the_pairing_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "nexo.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"pairing": python_server("servers.pairing")},
        agent={"channels": []},
    )
    assert main(["pair", "approve", "7KQ2-MXH0", "--config", str(config)]) == 1
    assert capsys.readouterr().err == (
        "nexo: '7KQ2-MXH0' is not a pairing code: codes are 8 characters from "
        "ABCDEFGHJKLMNPQRSTUVWXYZ23456789 (no I, O, 0 or 1), e.g. 7KQ2-MXHD; copy it from the sender's "
        "message (nothing was sent, so this does not count toward the approval lockout)\n"
    )
    assert not (tmp_path / "state" / "pairing").exists()
