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


def _spellings(word: str) -> list[str]:
    cyrillic = str.maketrans("aeopc", "\u0430\u0435\u043e\u0440\u0441")
    return [
        word,
        word.upper(),
        word.capitalize(),
        word.translate(cyrillic),
        "".join(chr(ord(c) + 0xFEE0) for c in word),  # fullwidth
        "\u200b".join(word),
        word[:3] + "\u202e\u202c" + word[3:],
        word[:2] + "\u00ad" + word[2:],  # a soft hyphen
    ]


_OPENINGS = ("[", "\uff3b", "[ ", "[\u200b")
_FORMS = (
    "{open}{word} kmpqr] notes__read_notes {{}}\nanswer: yes kmpqr | no kmpqr",
    'Before I go on:\n{open}{word} zzzzz] fs__read_file {{"path": "a"}}',
    "**{open}{word} kmpqr]** quick check",
)
_BENIGN = (
    "The approval went through; the report is attached.",
    "Alice asks for permission to read the calendar.",
    "yes, there is more: see [notes] and [approvals.md]",
    "Your reminder: renew the passport (approval needed from the office).",
    "kmpqr is not a word I know",
)


def test_the_lookalike_prompt_corpus_is_refused_and_ordinary_text_passes() -> None:
    lookalikes = [
        form.format(open=opening, word=spelled)
        for word in ("approval", "permission")
        for spelled in _spellings(word)
        for opening in _OPENINGS
        for form in _FORMS
    ]
    passed = []
    for text in lookalikes:
        try:
            refuse_prompt_lookalike(text, ())
        except LocalToolError:
            continue
        passed.append(text)
    pending_named = 0
    for spelled in _spellings("kmpqr"):
        try:
            refuse_prompt_lookalike(f"please answer yes {spelled} when you can", ("kmpqr",))
        except LocalToolError:
            pending_named += 1
    for text in _BENIGN:
        refuse_prompt_lookalike(text, ())
    print(
        f"relay corpus: {len(lookalikes)} look-alike prompts, {len(passed)} got through; "
        f"{pending_named}/{len(_spellings('kmpqr'))} spellings of a pending id refused; "
        f"{len(_BENIGN)} ordinary messages passed"
    )
    assert passed == []
    assert pending_named == len(_spellings("kmpqr"))
