"""Events without a sender: whom they run as, and the tally of what the pairing gate refused."""

from __future__ import annotations

import pytest

from orchestrator.config.channels import ChannelPairing
from orchestrator.intake.admission import principal_of, source_of
from orchestrator.intake.refusals import MAX_ROWS, Refusals
from tests.orchestrator.test_ratelimit import Clock


@pytest.mark.parametrize(
    ("pairing", "meta", "expected"),
    [
        ({}, {"source": "github"}, None),
        ({"no_sender": "source"}, {"source": "github"}, "webhook:github"),
        ({"no_sender": "source"}, {}, None),
        ({"no_sender": "source"}, {"source": "git hub"}, None),
        ({"no_sender": "source"}, {"source": "x" * 65}, None),
        ({"no_sender": "principal", "principal": "cc:operator"}, {"source": "github"}, "cc:operator"),
    ],
)
def test_a_sender_less_event_runs_only_as_the_principal_its_channel_names(
    pairing: dict[str, str], meta: dict[str, str], expected: str | None
) -> None:
    assert principal_of("webhook", ChannelPairing.model_validate(pairing), meta) == expected


def test_no_sender_principal_needs_a_principal_and_a_principal_needs_it() -> None:
    with pytest.raises(ValueError, match="no_sender: principal needs principal: NAME"):
        ChannelPairing.model_validate({"no_sender": "principal"})
    with pytest.raises(ValueError, match="'cc:op' is used only with no_sender: principal"):
        ChannelPairing.model_validate({"principal": "cc:op"})


def test_a_refusal_is_kept_under_its_source_name_and_nothing_else() -> None:
    assert [source_of(meta) for meta in ({"source": "github"}, {"chat_id": "c1"}, {"source": "a b"})] == [
        "github",
        "-",
        "-",
    ]


def test_the_first_refusal_of_a_source_is_told_and_every_one_is_counted() -> None:
    clock = Clock()
    refusals = Refusals(clock)
    told = [refusals.note("webhook", "no_sender", "github") for _ in range(3)]
    clock.now = 5.0
    quiet = refusals.note("tg", "mention_required", "-")
    assert [row is not None for row in told] == [True, False, False]
    assert quiet is None
    rows = refusals.as_json()
    assert [(r["server"], r["reason"], r["source"], r["count"], r["last_at"]) for r in rows] == [
        ("tg", "mention_required", "-", 1, 5.0),
        ("webhook", "no_sender", "github", 3, 0.0),
    ]
    assert (
        refusals.rows()[1]
        .line()
        .startswith(
            "webhook      REFUSED 3 events for carrying no sender id (source github). Fix: if the server "
            "authenticates its sources"
        )
    )


def test_a_flood_of_source_names_stays_a_bounded_tally_and_is_told_a_bounded_number_of_times() -> None:
    refusals = Refusals(Clock())
    told = sum(refusals.note("webhook", "no_sender", f"s{n}") is not None for n in range(MAX_ROWS + 300))
    rows = refusals.rows()
    assert (told, len(rows)) == (MAX_ROWS, MAX_ROWS + 1)
    overflow = [row for row in rows if row.source == "*"]
    assert [row.count for row in overflow] == [300]
