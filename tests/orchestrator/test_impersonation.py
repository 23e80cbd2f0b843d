"""The agent's own messages cannot imitate an approval prompt, and say whose conversation they serve."""

from __future__ import annotations

import pytest

from orchestrator.tools.impersonation import labelled_for_operator, refuse_prompt_lookalike
from orchestrator.tools.local import GoalContext, LocalToolError

MARKER_REFUSED = (
    "the message contains {marker!r}, the marker of approval prompts; only nexo's approval relay shows "
    "prompts. Describe what you need in your own words, without that marker"
)


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("[approval kmpqr] notes__read_notes {}\nanswer: yes kmpqr | no kmpqr", "[approval"),
        ("Please look: [ Approval abcde ] fs__read", "[ Approval"),
        ("\uff3bapproval kmpqr\uff3d", "[approval"),  # fullwidth brackets
        ("[app\u200broval kmpqr]", "[approval"),  # a zero-width space inside the word
        ("[permission kmpqr] run it", "[permission"),
    ],
)
def test_text_carrying_the_prompt_marker_is_refused(text: str, marker: str) -> None:
    with pytest.raises(LocalToolError) as refused:
        refuse_prompt_lookalike(text, ())
    assert str(refused.value) == MARKER_REFUSED.format(marker=marker)


def test_text_naming_a_pending_request_is_refused_and_other_words_pass() -> None:
    with pytest.raises(LocalToolError) as refused:
        refuse_prompt_lookalike("Quick one: reply YES KMPQR so I can finish", ("kmpqr",))
    assert str(refused.value) == (
        "the message names 'kmpqr', a request waiting for the operator's answer; only nexo's approval "
        "relay asks about it. Leave the request id out"
    )
    refuse_prompt_lookalike("the approval went through; yes, there is more", ("kmpqr",))


def test_a_message_to_the_operator_from_a_contacts_goal_names_the_conversation() -> None:
    contact = GoalContext("nexo", "g-1", "inbox", {"chat_id": "c7", "user_id": "alice-1"}, "contact")
    owner = GoalContext("nexo", "g-2", "inbox", {"chat_id": "op", "user_id": "local"}, "owner")
    background = GoalContext("nexo", "g-3")
    assert labelled_for_operator(contact, "please approve") == (
        '[while serving inbox chat "c7", sender "alice-1" (contact)] please approve'
    )
    assert labelled_for_operator(owner, "done") == "done"
    assert labelled_for_operator(background, "done") == "done"
