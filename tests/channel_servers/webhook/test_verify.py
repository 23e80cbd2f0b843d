"""Each signature scheme on its own: published vectors, happy paths and every refusal."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import pytest

from channel_servers.webhook.verify import (
    GitHubVerifier,
    HmacVerifier,
    Refused,
    SlackVerifier,
    StandardWebhooksVerifier,
    StripeVerifier,
    TokenVerifier,
    Verified,
    Verifier,
    body_digest,
    make_verifier,
    standard_webhooks_key,
)
from tests.channel_servers.webhook.conftest import ENV, STANDARD_KEY, START, body_for, sign

GITHUB_VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


def refusal(
    verifier: Verifier, headers: Mapping[str, str], body: bytes, now: float = START
) -> tuple[int, str]:
    with pytest.raises(Refused) as caught:
        verifier.verify(lower(headers), body, now)
    return caught.value.status, caught.value.message


def test_githubs_published_test_vector_passes() -> None:
    verifier = GitHubVerifier(b"It's a Secret to Everybody")
    headers = {"x-hub-signature-256": GITHUB_VECTOR_SIGNATURE}
    assert verifier.verify(headers, b"Hello, World!", START) == Verified()


def test_github_refuses_a_changed_body_a_wrong_secret_and_a_missing_header() -> None:
    good = GitHubVerifier(b"It's a Secret to Everybody")
    headers = {"X-Hub-Signature-256": GITHUB_VECTOR_SIGNATURE}
    assert refusal(good, headers, b"Hello, World?") == (401, "signature mismatch")
    assert refusal(GitHubVerifier(b"guess"), headers, b"Hello, World!") == (401, "signature mismatch")
    assert refusal(good, {}, b"Hello, World!") == (401, "missing header X-Hub-Signature-256")
    assert refusal(good, {"X-Hub-Signature-256": "  "}, b"Hello, World!") == (
        401,
        "missing header X-Hub-Signature-256",
    )
    assert refusal(good, {"X-Hub-Signature-256": "sha256=ü"}, b"Hello, World!") == (401, "signature mismatch")


def test_stripe_accepts_any_v1_signature_inside_the_window_and_reports_the_timestamp() -> None:
    verifier = make_verifier("stripe", ENV["STRIPE_SECRET"], window_s=300)
    body = body_for("stripe", "evt_1")
    headers = sign("stripe", body, "evt_1", START)
    rotated = {"Stripe-Signature": headers["Stripe-Signature"].replace("t=", "v1=00ff,t=")}
    assert verifier.verify(lower(headers), body, START + 300) == Verified(timestamp=int(START))
    assert verifier.verify(lower(rotated), body, START - 300) == Verified(timestamp=int(START))


def test_stripe_refuses_stale_future_unsigned_and_malformed_headers() -> None:
    verifier = StripeVerifier(ENV["STRIPE_SECRET"].encode(), 300)
    body = body_for("stripe", "evt_1")
    headers = sign("stripe", body, "evt_1", START)
    assert refusal(verifier, headers, body, START + 301) == (400, "timestamp outside the replay window")
    assert refusal(verifier, headers, body, START - 301) == (400, "timestamp outside the replay window")
    assert refusal(verifier, headers, body + b" ") == (401, "signature mismatch")
    assert refusal(verifier, {"Stripe-Signature": f"t={int(START)}"}, body) == (401, "signature mismatch")
    malformed = (401, "malformed header Stripe-Signature")
    assert refusal(verifier, {"Stripe-Signature": "v1=abc"}, body) == malformed
    assert refusal(verifier, {"Stripe-Signature": "t=1,t=2,v1=abc"}, body) == malformed
    assert refusal(verifier, {"Stripe-Signature": "t=-5,v1=abc"}, body) == malformed
    assert refusal(verifier, {}, body) == (401, "missing header Stripe-Signature")


def test_slack_checks_the_v0_signature_then_the_window_and_identifies_requests_without_an_event_id() -> None:
    verifier = SlackVerifier(ENV["SLACK_SECRET"].encode(), 60)
    body = b"command=%2Fdeploy&text=prod"
    headers = sign("slack", body, "", START)
    again = sign("slack", body, "", START + 1)
    first = verifier.verify(lower(headers), body, START + 60)
    second = verifier.verify(lower(again), body, START + 60)
    assert first.timestamp == int(START)
    assert [len(str(i)) for i in {first.fallback_id, second.fallback_id}] == [40, 40]
    assert refusal(verifier, headers, body, START + 61) == (400, "timestamp outside the replay window")
    assert refusal(verifier, headers, body, START - 61) == (400, "timestamp outside the replay window")
    assert refusal(verifier, {**headers, "X-Slack-Request-Timestamp": str(int(START) + 1)}, body) == (
        401,
        "signature mismatch",
    )
    assert refusal(verifier, {**headers, "X-Slack-Request-Timestamp": "soon"}, body) == (
        401,
        "malformed header X-Slack-Request-Timestamp",
    )
    assert refusal(verifier, {"X-Slack-Signature": "v0=00"}, body) == (
        401,
        "missing header X-Slack-Request-Timestamp",
    )


def test_standard_webhooks_accepts_one_matching_v1_among_several_and_returns_the_message_id() -> None:
    verifier = make_verifier("standard-webhooks", ENV["STANDARD_SECRET"], window_s=300)
    body = body_for("standard", "msg_1")
    headers = sign("standard", body, "msg_1", START)
    assert verifier.verify(lower(headers), body, START) == Verified(timestamp=int(START), fallback_id="msg_1")


def test_standard_webhooks_refuses_other_versions_a_changed_id_stale_times_and_missing_headers() -> None:
    verifier = StandardWebhooksVerifier(STANDARD_KEY, 300)
    body = body_for("standard", "msg_1")
    headers = sign("standard", body, "msg_1", START)
    signature = headers["webhook-signature"].split()[-1].removeprefix("v1,")
    assert refusal(verifier, {**headers, "webhook-signature": f"v1a,{signature}"}, body) == (
        401,
        "signature mismatch",
    )
    assert refusal(verifier, {**headers, "webhook-id": "msg_2"}, body) == (401, "signature mismatch")
    assert refusal(verifier, headers, body, START + 301) == (400, "timestamp outside the replay window")
    assert refusal(verifier, headers, body, START - 301) == (400, "timestamp outside the replay window")
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        partial = {key: value for key, value in headers.items() if key != name}
        assert refusal(verifier, partial, body) == (401, f"missing header {name}")


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ("c2VjcmV0", "starts with 'whsec_'"),
        ("whsec_not base64!", "'whsec_' then base64"),
        ("whsec_", "key bytes after 'whsec_'"),
    ],
)
def test_a_standard_webhooks_secret_must_be_whsec_and_base64(secret: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        standard_webhooks_key(secret)


def test_standard_webhooks_key_decodes_the_base64_after_the_prefix() -> None:
    assert standard_webhooks_key("whsec_" + base64.b64encode(b"k3y").decode()) == b"k3y"


@pytest.mark.parametrize("encoding", ["hex", "HEX", "base64"])
def test_generic_hmac_sha256_accepts_hex_or_base64_after_the_prefix(encoding: str) -> None:
    verifier = make_verifier("hmac-sha256", "s", window_s=300, header="X-Signature", prefix="sha256=")
    hex_value = sign("ci", b"{}", "d", START, {"HMAC256_SECRET": "s"})["X-Signature"].removeprefix("sha256=")
    values = {
        "hex": hex_value,
        "HEX": hex_value.upper(),
        "base64": base64.b64encode(bytes.fromhex(hex_value)).decode(),
    }
    result = verifier.verify({"x-signature": f"sha256={values[encoding]}"}, b"{}", START)
    assert result == Verified(fallback_id=body_digest(b"{}"))


def test_generic_hmac_refuses_a_missing_prefix_a_wrong_digest_and_a_missing_header() -> None:
    verifier = HmacVerifier(b"s", "sha1", "X-Sig", "sha1=")
    good = make_verifier("hmac-sha1", "s", window_s=1, header="X-Sig")
    body = b"payload"
    signature = sign("legacy", body, "d", START, {"HMAC1_SECRET": "s"})["X-Signature-SHA1"]
    assert good.verify({"x-sig": signature}, body, START).fallback_id == body_digest(body)
    assert refusal(verifier, {"X-Sig": signature}, body) == (401, "signature mismatch")
    assert refusal(verifier, {"X-Sig": f"sha1={signature}"}, body + b"!") == (401, "signature mismatch")
    assert refusal(verifier, {}, body) == (401, "missing header X-Sig")


def test_make_verifier_refuses_a_generic_hmac_without_a_header() -> None:
    with pytest.raises(ValueError, match="needs signature_header"):
        make_verifier("hmac-sha1", "s", window_s=1)


def test_token_scheme_takes_a_bearer_token_or_a_configured_header() -> None:
    bearer = make_verifier("token", "t0ken", window_s=1)
    header = make_verifier("token", "t0ken", window_s=1, header="X-Token", prefix="token ")
    assert bearer.verify({"authorization": "Bearer t0ken"}, b"x", START) == Verified(
        fallback_id=body_digest(b"x")
    )
    assert bearer.verify({"authorization": "bearer  t0ken "}, b"x", START).fallback_id == body_digest(b"x")
    assert header.verify({"x-token": "token t0ken"}, b"", START).fallback_id == body_digest(b"")


def test_token_scheme_refuses_wrong_tokens_schemes_and_prefixes() -> None:
    bearer = TokenVerifier(b"t0ken")
    header = TokenVerifier(b"t0ken", "X-Token", "token ")
    assert refusal(bearer, {"Authorization": "Basic t0ken"}, b"") == (401, "signature mismatch")
    assert refusal(bearer, {"Authorization": "Bearer t0kem"}, b"") == (401, "signature mismatch")
    assert refusal(bearer, {}, b"") == (401, "missing header Authorization")
    assert refusal(header, {"X-Token": "t0ken"}, b"") == (401, "signature mismatch")
    assert refusal(header, {"Authorization": "Bearer t0ken"}, b"") == (401, "missing header X-Token")
