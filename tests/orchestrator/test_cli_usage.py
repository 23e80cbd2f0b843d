"""How `nexo` answers a command line it cannot parse: usage on stderr and exit 64, never 2."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from orchestrator.cli.main import main


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ((), "nexo: error: the following arguments are required: COMMAND"),
        (("mystery",), "nexo: error: argument COMMAND: invalid choice: 'mystery'"),
        (("memory", "forget"), "nexo memory forget: error: the following arguments are required: id"),
        (("memory", "forget", "seven"), "nexo memory forget: error: argument id: invalid int value: 'seven'"),
        (("status", "--colour"), "nexo: error: unrecognized arguments: --colour"),
    ],
)
def test_a_usage_error_exits_64_with_the_usage(
    argv: Sequence[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 64
    assert err.startswith("usage: nexo")
    assert complaint in err
