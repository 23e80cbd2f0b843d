"""The secret guard: modes, what its errors and logs may say, redaction, and the rule table itself."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import pytest

from servers.memory.guard import SecretBlocked, SecretGuard
from shared.secrets import Finding, redact
from shared.secrets.rules import RULE_IDS, RULES
from tests.servers.memory.test_guard_corpus import SEED, Hit, true_positives

GITHUB_PAT = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
AWS_KEY_ID = "AKIA" + "QWERTYUIOPASDFGH"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzXAMPLEKEY"
HINT = (
    "Remove the secret and store the rest, or store a reference to where the secret lives instead of its "
    "value (for example the environment variable name GITHUB_TOKEN or the secret manager entry), "
    "then try again."
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def windows(secret: str, size: int = 8) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


@pytest.fixture(scope="module")
def hits() -> list[Hit]:
    return true_positives(SEED, per_case=4)


def test_clean_text_passes_unchanged_in_every_mode_without_a_log(caplog: pytest.LogCaptureFixture) -> None:
    text = "Ana prefers green tea; commit 3f2a9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3 fixed it."
    caplog.set_level(logging.DEBUG, logger="servers.memory.guard")
    results = [SecretGuard(mode).check(text, where="memory") for mode in ("block", "redact", "warn")]
    assert (results, caplog.records) == ([text, text, text], [])


def test_scan_reports_each_secret_with_its_rule_and_span_in_order() -> None:
    text = f"key {AWS_KEY_ID} and token {GITHUB_PAT}."
    a, g = text.index(AWS_KEY_ID), text.index(GITHUB_PAT)
    assert SecretGuard().scan(text) == [
        Finding("aws-access-key-id", a, a + len(AWS_KEY_ID)),
        Finding("github-pat", g, g + len(GITHUB_PAT)),
    ]


def test_block_mode_raises_with_rule_ids_the_content_hash_and_how_to_proceed() -> None:
    text = f"token {GITHUB_PAT} and key {AWS_KEY_ID}"
    with pytest.raises(SecretBlocked) as caught:
        SecretGuard("block").check(text, where="transcript")
    exc = caught.value
    assert (exc.rule_ids, exc.content_sha256, exc.where, str(exc)) == (
        ("github-pat", "aws-access-key-id"),
        sha(text),
        "transcript",
        "refused to store this transcript content: it contains what looks like a secret "
        f"(github-pat, aws-access-key-id; content sha256:{sha(text)}). {HINT}",
    )


def test_a_block_error_never_contains_eight_characters_of_any_secret(hits: list[Hit]) -> None:
    guard = SecretGuard("block")
    leaks = []
    for hit in hits:
        with pytest.raises(SecretBlocked) as caught:
            guard.check(hit.text, where="memory")
        said = f"{caught.value} {caught.value!r} {caught.value.args}"
        leaks += [(hit.rule_id, piece) for piece in windows(hit.secret) if piece in said]
    assert leaks == []


def test_redact_mode_replaces_every_secret_with_its_rule_marker(hits: list[Hit]) -> None:
    guard = SecretGuard("redact")
    problems = []
    for hit in hits:
        redacted = guard.check(hit.text, where="memory")
        if hit.secret in redacted or f"[REDACTED:{hit.rule_id}]" not in redacted:
            problems.append((hit.rule_id, redacted))
    assert problems == []


def test_redaction_keeps_the_text_around_the_secret_and_the_keyword_of_anchored_rules() -> None:
    text = f"export GH={GITHUB_PAT}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nthanks"
    assert SecretGuard("redact").check(text, where="memory") == (
        "export GH=[REDACTED:github-pat]\nAWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-access-key]\nthanks"
    )


def test_overlapping_findings_redact_as_one_marker_without_fragments() -> None:
    body = "\\n".join(["-----BEGIN PRIVATE KEY-----", "M" * 64, "QUJD" * 16, "-----END PRIVATE KEY-----\\n"])
    text = f'{{"type": "service_account", "private_key": "{body}", "client_id": "1"}}'
    guard = SecretGuard("redact")
    assert {f.rule_id for f in guard.scan(text)} == {"gcp-service-account-key", "private-key"}
    assert guard.check(text, where="memory") == (
        '{"type": "service_account", "private_key": "[REDACTED:gcp-service-account-key]", "client_id": "1"}'
    )


def test_redact_merges_overlaps_and_keeps_adjacent_findings_apart() -> None:
    findings = [Finding("b", 4, 9), Finding("a", 2, 6), Finding("c", 9, 11), Finding("d", 3, 5)]
    assert (redact("0123456789abcdef", findings), redact("clean", [])) == (
        "01[REDACTED:a][REDACTED:c]bcdef",
        "clean",
    )


def test_warn_mode_keeps_the_text_and_logs_rule_ids_and_hash_only(caplog: pytest.LogCaptureFixture) -> None:
    text = f"token {GITHUB_PAT}"
    caplog.set_level(logging.WARNING, logger="servers.memory.guard")
    assert SecretGuard("warn").check(text, where="MEMORY.md") == text
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            logging.WARNING,
            "MEMORY.md: stored content that looks like it holds a secret "
            f"(github-pat; content sha256:{sha(text)}) because the secret guard is in warn mode",
        )
    ]


def test_redact_mode_logs_which_rules_fired_and_never_the_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="servers.memory.guard")
    SecretGuard("redact").check(f"{GITHUB_PAT} {AWS_KEY_ID}", where="memory")
    assert [r.getMessage() for r in caplog.records] == [
        "memory: redacted 2 secret(s) (github-pat, aws-access-key-id)"
    ]


def test_disabled_rules_do_not_fire_and_the_others_still_do() -> None:
    guard = SecretGuard("redact", disabled_rules={"github-pat"})
    assert (
        guard.check(f"{GITHUB_PAT} {AWS_KEY_ID}", where="memory")
        == f"{GITHUB_PAT} [REDACTED:aws-access-key-id]"
    )


def test_unknown_disabled_rules_and_modes_are_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"unknown secret guard rule id\(s\) 'github', 'nope' in disabled_rules"
    ):
        SecretGuard(disabled_rules=["nope", "github-pat", "github"])
    with pytest.raises(
        ValueError, match="unknown secret guard mode 'loud'; expected one of block, redact, warn"
    ):
        SecretGuard("loud")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "AWS secrets rotated in commit 3f2a9c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3",
        "A key file starts with -----BEGIN PRIVATE KEY----- and then base64 lines, never paste one here.",
        "eyJhYmNkZWZnaGlqa2xt.eyJub3RhdG9rZW4.c2lnbmF0dXJl",
        "sk_live_... goes in the vault",
    ],
)
def test_validators_reject_lookalikes_that_cannot_be_secrets(text: str) -> None:
    assert SecretGuard().scan(text) == []


def test_a_truncated_private_key_is_caught_up_to_the_end_of_the_text() -> None:
    text = "here:\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAA" * 4 + "\nand then"
    start = text.index("-----BEGIN")
    assert SecretGuard().scan(text) == [Finding("private-key", start, len(text))]


def test_the_rule_table_has_unique_kebab_case_ids_descriptions_and_lowercase_keywords() -> None:
    ids = [rule.id for rule in RULES]
    problems = [
        rule.id
        for rule in RULES
        if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule.id)
        or not rule.description
        or any(keyword != keyword.lower() for keyword in rule.keywords)
    ]
    assert (len(ids) == len(set(ids)) == len(RULE_IDS), problems) == (True, [])
    assert len(RULES) >= 38


def test_every_rule_is_documented_in_its_table_order() -> None:
    page = (Path(__file__).parents[3] / "docs" / "secret-guard.md").read_text()
    rules_section = page.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", rules_section, re.MULTILINE)
    assert (documented, f"\n{len(RULES)} rules." in rules_section) == ([rule.id for rule in RULES], True)


@pytest.mark.parametrize(
    ("text", "rule_id"),
    [
        ("my password is Tr0ub4dor3", "password-phrase"),
        ("The password is hunter2!", "password-phrase"),
        ("PIN: 1234", "pin-phrase"),
        ("the code is 4711", "code-phrase"),
    ],
)
def test_a_credential_given_in_words_is_not_stored_in_memory(text: str, rule_id: str) -> None:
    with pytest.raises(SecretBlocked) as blocked:
        SecretGuard().check(text, where="memory")
    assert rule_id in blocked.value.rule_ids
