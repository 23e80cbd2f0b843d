"""Sender ids, group chat ids and approval codes: one exact ASCII spelling each, or a refusal."""

from __future__ import annotations

import unicodedata

import pytest

from shared.protocol.identities import (
    CODE_ALPHABET,
    InvalidCode,
    InvalidSender,
    normalize_chat,
    normalize_code,
    normalize_sender,
)


@pytest.mark.parametrize(
    ("platform", "raw", "expected"),
    [
        ("telegram", "123456789", "123456789"),
        ("telegram", "-1001234567890", "-1001234567890"),
        ("Telegram", "42", "42"),
        ("slack", "u024be7lh", "U024BE7LH"),
        ("slack", "W012A3CDE", "W012A3CDE"),
        ("slack", "T0001", "T0001"),
        ("whatsapp", "+1 555-123-4567", "15551234567"),
        ("whatsapp", "+1 (555) 123 4567", "15551234567"),
        ("whatsapp", "15551234567@s.whatsapp.net", "15551234567"),
        ("whatsapp", "15551234567@C.US", "15551234567"),
        ("whatsapp", "120363012345678901@g.us", "120363012345678901@g.us"),
        ("whatsapp", "15551234567-1612345678@g.us", "15551234567-1612345678@g.us"),
        ("email", "Alice.Smith+nexo@Example.ORG", "alice.smith+nexo@example.org"),
        ("email", "bob@mail.example.co.uk", "bob@mail.example.co.uk"),
        ("discord", "80351110224678912", "80351110224678912"),
        ("generic", "Alice", "Alice"),
        ("console", "operator", "operator"),
        ("webhook", "github:octo-org.repo@main+1", "github:octo-org.repo@main+1"),
        ("matrix", "@alice:example.org", "@alice:example.org"),
    ],
)
def test_valid_ids_have_one_spelling(platform: str, raw: str, expected: str) -> None:
    assert normalize_sender(platform, raw) == expected


def test_generic_ids_stay_case_sensitive() -> None:
    assert normalize_sender("generic", "Alice") != normalize_sender("generic", "alice")


@pytest.mark.parametrize(
    ("platform", "raw", "message"),
    [
        ("telegram", "", "sender id is empty: pass the platform's id of the sender"),
        ("telegram", " \t ", "sender id is empty: pass the platform's id of the sender"),
        (
            "telegram",
            "@alice",
            "sender id '@alice' is a Telegram username: usernames change and can be taken over by someone "
            "else, so pairing uses the numeric id (e.g. 123456789); find it in the message's from.id",
        ),
        (
            "telegram",
            "0123",
            "sender id '0123' is not a Telegram id: use the numeric id (digits, a leading '-' for groups, "
            "no leading zeros), e.g. 123456789 or -1001234567890",
        ),
        (
            "slack",
            "C024BE7LH",
            "sender id 'C024BE7LH' is not a Slack id: use a user id (U..., W... or T... followed by letters "
            "and digits), e.g. U024BE7LH; display names and @handles are not ids",
        ),
        (
            "whatsapp",
            "12345",
            "sender id '12345' is not a WhatsApp number: use the E.164 number (6-15 digits, an optional "
            "leading '+', spaces and dashes allowed), e.g. +15551234567 or 15551234567@s.whatsapp.net",
        ),
        (
            "whatsapp",
            "abc@g.us",
            "sender id 'abc@g.us' is not a WhatsApp group JID: expected digits followed by @g.us, "
            "e.g. 120363012345678901@g.us",
        ),
        (
            "email",
            "Alice <alice@example.org>",
            "sender id 'Alice <alice@example.org>' is not an email address: use the bare address with "
            "exactly one '@' and a dotted domain, e.g. alice@example.org "
            "(no display name, no angle brackets)",
        ),
        (
            "discord",
            "12345678901234",
            "sender id '12345678901234' is not a Discord id: use the numeric snowflake (15-22 digits), "
            "e.g. 80351110224678912, not a username or a <@mention>",
        ),
        (
            "generic",
            "a/b",
            "sender id 'a/b' has characters ids may not contain: use letters, digits and ._:@+- only "
            "(no spaces)",
        ),
    ],
)
def test_invalid_ids_are_refused_with_the_reason_and_the_fix(platform: str, raw: str, message: str) -> None:
    with pytest.raises(InvalidSender) as caught:
        normalize_sender(platform, raw)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("platform", "raw"),
    [
        ("generic", "owner1 "),
        ("generic", " owner1"),
        ("console", "owner1\t"),
        ("telegram", "  123456789\n"),
        ("email", "alice@example.org\r\n"),
        ("slack", "U024BE7LH "),
        ("whatsapp", " +15551234567"),
        ("discord", "80351110224678912\v"),
    ],
)
def test_ids_padded_with_whitespace_are_refused_not_trimmed_into_a_match(platform: str, raw: str) -> None:
    with pytest.raises(InvalidSender, match="leading or trailing whitespace: ids are matched exactly"):
        normalize_sender(platform, raw)
    with pytest.raises(InvalidSender, match="leading or trailing whitespace"):
        normalize_chat(platform, raw)


def test_every_canonical_id_canonicalises_to_itself() -> None:
    samples = [
        ("telegram", "-1001234567890"),
        ("slack", "u024be7lh"),
        ("whatsapp", "+1 (555) 123-4567"),
        ("whatsapp", "15551234567@C.US"),
        ("email", "Alice.Smith+nexo@Example.ORG"),
        ("discord", "80351110224678912"),
        ("generic", "github:octo-org.repo@main+1"),
    ]
    for platform, raw in samples:
        canonical = normalize_sender(platform, raw)
        assert normalize_sender(platform, canonical) == canonical


@pytest.mark.parametrize(
    ("platform", "raw"),
    [
        ("whatsapp", "+1555+1234567"),
        ("whatsapp", "1555123456789012"),
        ("email", "alice@example"),
        ("email", "alice@@example.org"),
        ("email", "a@b@example.org"),
        ("email", ".alice@example.org"),
        ("email", "al..ice@example.org"),
        ("email", "alice@-example.org"),
        ("discord", "<@80351110224678912>"),
        ("telegram", "12a"),
        ("slack", "U0"),
        ("generic", "alice smith"),
    ],
)
def test_malformed_ids_are_refused(platform: str, raw: str) -> None:
    with pytest.raises(InvalidSender):
        normalize_sender(platform, raw)


@pytest.mark.parametrize(
    ("platform", "allowed", "lookalike", "character"),
    [
        ("telegram", "123456789", "１２３４５６７８９", "U+FF11 (FULLWIDTH DIGIT ONE) at position 0"),
        ("generic", "alice", "аlice", "U+0430 (CYRILLIC SMALL LETTER A) at position 0"),
        ("generic", "alice", "alice\u200b", "U+200B (ZERO WIDTH SPACE) at position 5"),
        ("email", "bob@example.org", "bob@exаmple.org", "U+0430 (CYRILLIC SMALL LETTER A) at position 6"),
        ("slack", "U024BE7LH", "Ｕ024BE7LH", "U+FF35 (FULLWIDTH LATIN CAPITAL LETTER U) at position 0"),
        ("generic", "alice", "ali\u00adce", "U+00AD (SOFT HYPHEN) at position 3"),
        ("generic", "alice", "alice\x00", "U+0000 (a control character) at position 5"),
    ],
)
def test_lookalike_fullwidth_and_invisible_characters_are_refused_outright(
    platform: str, allowed: str, lookalike: str, character: str
) -> None:
    with pytest.raises(InvalidSender) as caught:
        normalize_sender(platform, lookalike)
    assert character in str(caught.value)
    assert "ids must be printable ASCII" in str(caught.value)
    assert normalize_sender(platform, allowed) == allowed


def test_unicode_folding_would_have_matched_the_fullwidth_id_so_it_is_never_applied() -> None:
    fullwidth = "１２３４５６７８９"
    assert unicodedata.normalize("NFKC", fullwidth) == "123456789"
    with pytest.raises(InvalidSender):
        normalize_sender("telegram", fullwidth)


def test_ids_longer_than_256_characters_are_refused() -> None:
    assert normalize_sender("generic", "a" * 256) == "a" * 256
    with pytest.raises(InvalidSender) as caught:
        normalize_sender("generic", "a" * 257)
    assert str(caught.value).endswith("is 257 characters long; ids have at most 256")


def test_slack_group_chats_take_conversation_ids_that_senders_cannot_use() -> None:
    assert normalize_chat("slack", "c024be7lh") == "C024BE7LH"
    assert normalize_chat("slack", "G012AB3CD") == "G012AB3CD"
    assert normalize_chat("telegram", "-1001234567890") == "-1001234567890"
    with pytest.raises(InvalidSender) as caught:
        normalize_chat("slack", "#general")
    assert str(caught.value).startswith("chat id '#general' is not a Slack id: use a conversation id")


@pytest.mark.parametrize(
    ("typed", "code"),
    [
        ("7KQ2MXHD", "7KQ2MXHD"),
        ("7kq2-mxhd", "7KQ2MXHD"),
        (" 7KQ2 MXHD\n", "7KQ2MXHD"),
        ("7k-q2 mx-hd", "7KQ2MXHD"),
    ],
)
def test_typed_codes_are_normalised(typed: str, code: str) -> None:
    assert normalize_code(typed) == code


@pytest.mark.parametrize(
    "typed", ["7KQ2MXH", "7KQ2MXHDX", "7KQ2MXH0", "7KQ2MXHI", "7KQ2MXHO", "７KQ2MXHD", ""]
)
def test_malformed_codes_are_refused_naming_the_alphabet(typed: str) -> None:
    with pytest.raises(InvalidCode) as caught:
        normalize_code(typed)
    assert f"codes are 8 characters from {CODE_ALPHABET} (no I, O, 0 or 1)" in str(caught.value)


def test_the_code_alphabet_has_no_lookalikes() -> None:
    assert len(CODE_ALPHABET) == len(set(CODE_ALPHABET)) == 32
    assert not set("IO01") & set(CODE_ALPHABET)
