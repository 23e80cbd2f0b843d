"""The secret guard's rule table: one precise pattern per credential format.

Patterns follow the gitleaks approach: anchor on what the issuer makes distinctive (a prefix, a
fixed length, an embedded marker such as OpenAI's ``T3BlbkFJ``), and fall back to a keyword anchor
(``aws_secret_access_key = ...``) only for formats that have no shape of their own. Every pattern
is compiled with ``re.ASCII`` so ``\\w``, ``\\d`` and the boundaries mean what the formats mean.

A rule may name a ``secret`` group: then only that group is the finding (the keyword around it
stays readable after redaction). ``keywords`` is a cheap prefilter: the regex runs only when one of
them occurs in the lowercased text. ``validate`` rejects matches whose content cannot be the secret
(a git SHA after "aws secret", a ``eyJ...`` string that does not decode to a JWT header).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

# Token boundaries: a token must not be glued to more token characters on either side, so a
# near-miss of the wrong length (one character more or less) is not reported.
_L = r"(?<![A-Za-z0-9])"
_R = r"(?![A-Za-z0-9])"
_R_URLSAFE = r"(?![A-Za-z0-9_\-])"
# "key = value", "key: value", '"key": "value"', "key => value", "key is value".
_ASSIGN = r"""["']?\s*(?:=>|:=|[:=]|\s(?:is\s)?)\s*["']?"""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    description: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    validate: Callable[[str], bool] | None = None


def _rule(
    rule_id: str,
    description: str,
    regex: str,
    keywords: tuple[str, ...] = (),
    validate: Callable[[str], bool] | None = None,
) -> Rule:
    return Rule(rule_id, description, re.compile(regex, re.ASCII), keywords, validate)


def _mixed_case_not_hex(value: str) -> bool:
    """40 base64 characters from a key generator, not a git SHA or a word."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and not re.fullmatch(r"[0-9a-fA-F]+", value)
    )


def _jwt_header(value: str) -> bool:
    """The first segment decodes to a JSON object naming its algorithm, as every JWS header does."""
    segment = value.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(header, dict) and "alg" in header


def _pem_body(value: str) -> bool:
    """A real key block carries base64 lines; prose that merely names the header does not."""
    return re.search(r"[A-Za-z0-9+/]{40,}", value) is not None


_PHRASE_ASSIGN = r"""(?:\s+(?:is|was|=|:)|\s*[:=])\s*["'`]?"""
"""Between a credential word and its value: "is", "was", ":" or "=" (a bare space is prose)."""
_NOT_A_SECRET_CODE = "".join(
    rf"(?<!{word} )"
    for word in (
        "zip", "postal", "post", "status", "exit", "error", "area", "country", "source", "return",
        "response", "http", "product", "dial", "airport", "tracking", "reference", "booking", "tax",
        "sort", "swift", "bank", "color", "colour", "promo", "discount", "coupon", "voucher", "dress",
        "region", "language", "currency", "item", "order", "article", "postcode", "station", "ZIP",
        "Zip", "Postal", "Status", "Exit", "Error", "Area", "Country", "HTTP", "Product", "Tracking",
        "Reference", "Booking", "Promo", "Discount", "Order", "Item",
    )
)  # fmt: skip
"""Codes that are labels, not secrets: a zip code, an HTTP status code, an exit code."""
_NOT_PASSWORDS = frozenset(
    (
        "stored", "saved", "kept", "set", "not", "the", "in", "required", "needed", "correct",
        "wrong", "incorrect", "invalid", "expired", "missing", "empty", "changed", "reset", "too",
        "now", "still", "also", "hidden", "masked", "redacted", "unknown", "secret", "none", "null",
        "optional", "protected", "encrypted", "hashed", "rotated", "updated", "different", "same",
        "weak", "strong", "long", "short", "ok", "fine", "good", "bad", "there", "here", "below",
        "above", "attached", "managed", "generated",
    )
)  # fmt: skip


def _password_value(value: str) -> bool:
    """A value, not a word of the sentence around it or a placeholder for one."""
    lowered = value.lower()
    if lowered in _NOT_PASSWORDS or lowered.strip("*•x.") == "":
        return False
    if value[0] in "$<{%[(" or value.startswith("REDACTED") or "[REDACTED:" in value:
        return False
    return not (value.isalpha() and value.islower() and len(value) <= 5)


_PEM_LABEL = r"[ A-Z0-9_\-]{0,100}PRIVATE KEY(?: BLOCK)?-----"

RULES: tuple[Rule, ...] = (
    # -- cloud providers ---------------------------------------------------------------------
    _rule(
        "aws-access-key-id",
        "AWS access key ID (AKIA/ASIA/... + 16 base32 characters)",
        _L + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}" + _R,
        ("a3t", "akia", "asia", "abia", "acca"),
    ),
    _rule(
        "aws-secret-access-key",
        "AWS secret access key (40 base64 characters after an AWS secret keyword)",
        r"(?i:\b(?:aws|amazon)[\w .\-]{0,20}?secret[\w .\-]{0,25}?|\bsecret_?access_?key)"
        + _ASSIGN
        + r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("secret",),
        _mixed_case_not_hex,
    ),
    _rule(
        "gcp-api-key",
        "Google Cloud API key (AIza + 35 characters)",
        _L + r"AIza[A-Za-z0-9_\-]{35}" + _R_URLSAFE,
        ("aiza",),
    ),
    _rule(
        "gcp-service-account-key",
        "Google Cloud service-account key file (the private_key field)",
        r'"private_key"\s*:\s*"(?P<secret>-----BEGIN PRIVATE KEY-----[A-Za-z0-9+/=\\\s]{64,}?'
        r'-----END PRIVATE KEY-----(?:\\n)?)"',
        ("private_key",),
    ),
    _rule(
        "azure-storage-key",
        "Azure storage account key (88 base64 characters, in a connection string or after a keyword)",
        r"(?i:AccountKey|azure[\w .\-]{0,20}?key)"
        + _ASSIGN
        + r"(?<![A-Za-z0-9+/])(?P<secret>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])",
        ("accountkey", "azure"),
    ),
    _rule(
        "azure-ad-client-secret",
        "Azure AD (Entra ID) client secret (3 characters, a digit, Q~, 31-34 characters)",
        r"(?<![A-Za-z0-9_~.\-])(?P<secret>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~\-])",
        ("q~",),
    ),
    _rule(
        "digitalocean-token",
        "DigitalOcean personal access, OAuth or refresh token (do[opr]_v1_ + 64 hex)",
        _L + r"do[opr]_v1_[a-f0-9]{64}" + _R,
        ("_v1_",),
    ),
    _rule(
        "databricks-token",
        "Databricks personal access token (dapi + 32 hex)",
        _L + r"dapi[a-f0-9]{32}(?:-\d)?" + _R,
        ("dapi",),
    ),
    # -- AI providers ------------------------------------------------------------------------
    _rule(
        "anthropic-api-key",
        "Anthropic API or admin key (sk-ant-api03-/sk-ant-admin01- + 93 characters + AA)",
        _L + r"sk-ant-(?:api03|admin01)-[A-Za-z0-9_\-]{93}AA" + _R_URLSAFE,
        ("sk-ant-",),
    ),
    _rule(
        "openai-api-key",
        "OpenAI user API key (sk- + 20 + T3BlbkFJ + 20 characters)",
        _L + r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}" + _R,
        ("t3blbkfj",),
    ),
    _rule(
        "openai-project-key",
        "OpenAI project, service-account or admin key (sk-proj-/sk-svcacct-/sk-admin-)",
        _L + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,250}" + _R_URLSAFE,
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
    ),
    _rule(
        "huggingface-token",
        "Hugging Face access token (hf_ + 34 letters)",
        _L + r"hf_[A-Za-z]{34}" + _R,
        ("hf_",),
    ),
    _rule(
        "huggingface-org-token",
        "Hugging Face organisation API token (api_org_ + 34 letters)",
        _L + r"api_org_[A-Za-z]{34}" + _R,
        ("api_org_",),
    ),
    # -- source hosting ----------------------------------------------------------------------
    _rule(
        "github-pat",
        "GitHub classic personal access token (ghp_ + 36)",
        _L + r"ghp_[A-Za-z0-9]{36}" + _R,
        ("ghp_",),
    ),
    _rule(
        "github-oauth-token",
        "GitHub OAuth access token (gho_ + 36)",
        _L + r"gho_[A-Za-z0-9]{36}" + _R,
        ("gho_",),
    ),
    _rule(
        "github-user-token",
        "GitHub App user-to-server token (ghu_ + 36)",
        _L + r"ghu_[A-Za-z0-9]{36}" + _R,
        ("ghu_",),
    ),
    _rule(
        "github-app-token",
        "GitHub App installation (server-to-server) token (ghs_ + 36)",
        _L + r"ghs_[A-Za-z0-9]{36}" + _R,
        ("ghs_",),
    ),
    _rule(
        "github-refresh-token",
        "GitHub refresh token (ghr_ + 36)",
        _L + r"ghr_[A-Za-z0-9]{36}" + _R,
        ("ghr_",),
    ),
    _rule(
        "github-fine-grained-pat",
        "GitHub fine-grained personal access token (github_pat_ + 82)",
        _L + r"github_pat_[A-Za-z0-9_]{82}" + r"(?![A-Za-z0-9_])",
        ("github_pat_",),
    ),
    _rule(
        "gitlab-pat",
        "GitLab personal, project or group access token (glpat-)",
        _L + r"glpat-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?" + _R_URLSAFE,
        ("glpat-",),
    ),
    _rule(
        "gitlab-pipeline-trigger-token",
        "GitLab pipeline trigger token (glptt- + 40 hex)",
        _L + r"glptt-[a-f0-9]{40}" + _R,
        ("glptt-",),
    ),
    _rule(
        "gitlab-runner-token",
        "GitLab runner authentication (glrt-) or registration (GR1348941) token",
        _L
        + r"(?:glrt-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?|GR1348941[A-Za-z0-9_\-]{20})"
        + _R_URLSAFE,
        ("glrt-", "gr1348941"),
    ),
    # -- messaging ---------------------------------------------------------------------------
    _rule(
        "slack-bot-token",
        "Slack bot token (xoxb-<team>-<bot>-...)",
        _L + r"xoxb-\d{10,13}-\d{10,13}[A-Za-z0-9\-]*",
        ("xoxb-",),
    ),
    _rule(
        "slack-user-token",
        "Slack user or configuration token (xoxp-/xoxe-)",
        _L + r"xox[pe](?:-\d{10,13}){3}-[A-Za-z0-9\-]{28,34}" + _R_URLSAFE,
        ("xoxp-", "xoxe-"),
    ),
    _rule(
        "slack-app-token",
        "Slack app-level token (xapp-)",
        _L + r"xapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]+" + _R,
        ("xapp-",),
    ),
    _rule(
        "slack-webhook-url",
        "Slack incoming-webhook or workflow URL (hooks.slack.com/services/...)",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        ("hooks.slack.com",),
    ),
    _rule(
        "telegram-bot-token",
        "Telegram bot token (<bot id>:A + 34 characters)",
        _L + r"\d{5,16}:A[A-Za-z0-9_\-]{34}" + _R_URLSAFE,
        (":a",),
    ),
    _rule(
        "twilio-api-key",
        "Twilio API key SID (SK + 32 hex)",
        _L + r"SK[0-9a-fA-F]{32}" + _R,
        ("sk",),
    ),
    _rule(
        "sendgrid-api-key",
        "SendGrid API key (SG.<22>.<43>)",
        _L + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _R_URLSAFE,
        ("sg.",),
    ),
    # -- package registries and developer platforms ------------------------------------------
    _rule(
        "npm-token",
        "npm access token (npm_ + 36)",
        _L + r"npm_[A-Za-z0-9]{36}" + _R,
        ("npm_",),
    ),
    _rule(
        "pypi-token",
        "PyPI or TestPyPI upload token (a pypi- macaroon)",
        _L + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}",
        ("pypi-age",),
    ),
    _rule(
        "hashicorp-vault-token",
        "HashiCorp Vault service or batch token (hvs./hvb.)",
        _L + r"hv[sb]\.[A-Za-z0-9_\-]{90,300}" + _R_URLSAFE,
        ("hvs.", "hvb."),
    ),
    _rule(
        "hashicorp-terraform-token",
        "HashiCorp Terraform Cloud/Enterprise API token (<14>.atlasv1.<60-70>)",
        _L + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}" + r"(?![A-Za-z0-9_\-=])",
        ("atlasv1",),
    ),
    _rule(
        "pulumi-token",
        "Pulumi access token (pul- + 40 hex)",
        _L + r"pul-[a-f0-9]{40}" + _R,
        ("pul-",),
    ),
    _rule(
        "postman-api-key",
        "Postman API key (PMAK-<24 hex>-<34 hex>)",
        _L + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _R,
        ("pmak-",),
    ),
    _rule(
        "grafana-api-key",
        'Grafana API key (base64 of {"k":"...)',
        _L + r"eyJrIjoi[A-Za-z0-9+/]{70,400}={0,3}",
        ("eyjrijoi",),
    ),
    _rule(
        "grafana-cloud-token",
        "Grafana Cloud access policy token (glc_)",
        _L + r"glc_[A-Za-z0-9+/]{32,400}={0,3}",
        ("glc_",),
    ),
    _rule(
        "grafana-service-account-token",
        "Grafana service account token (glsa_<32>_<8 hex>)",
        _L + r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _R,
        ("glsa_",),
    ),
    _rule(
        "sentry-user-token",
        "Sentry user auth token (sntryu_ + 64 hex, or 64 hex after a Sentry token keyword)",
        _L
        + r"sntryu_[a-f0-9]{64}"
        + _R
        + r"|(?i:\bsentry[\w .\-]{0,20}?(?:token|key))"
        + _ASSIGN
        + r"(?<![A-Za-z0-9])(?P<secret>[a-f0-9]{64})"
        + _R,
        ("sntryu_", "sentry"),
    ),
    _rule(
        "sentry-org-token",
        "Sentry organisation auth token (sntrys_)",
        _L + r"sntrys_eyJpYXQiO[A-Za-z0-9+/=]{10,400}_[A-Za-z0-9+/]{43}" + r"(?![A-Za-z0-9+/])",
        ("sntrys_",),
    ),
    _rule(
        "sentry-dsn",
        "Sentry DSN key (the 32-hex user part of https://<key>@...sentry.../<project>)",
        r"https?://(?P<secret>[a-f0-9]{32}(?::[a-f0-9]{32})?)@[A-Za-z0-9.\-]*sentry[A-Za-z0-9.\-]*"
        r"(?::\d+)?/\d+",
        ("sentry",),
    ),
    # -- commerce ----------------------------------------------------------------------------
    _rule(
        "stripe-secret-key",
        "Stripe secret or restricted key (sk_/rk_ + live/test/prod)",
        _L + r"(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}" + _R,
        ("sk_", "rk_"),
    ),
    _rule(
        "shopify-access-token",
        "Shopify access token (shpat_/shpca_/shppa_ + 32 hex)",
        _L + r"shp(?:at|ca|pa)_[a-fA-F0-9]{32}" + _R,
        ("shpat_", "shpca_", "shppa_"),
    ),
    _rule(
        "shopify-shared-secret",
        "Shopify app shared secret (shpss_ + 32 hex)",
        _L + r"shpss_[a-fA-F0-9]{32}" + _R,
        ("shpss_",),
    ),
    # -- credentials in prose ----------------------------------------------------------------
    _rule(
        "password-phrase",
        "A password, passphrase or passcode given in words (my password is ..., Password: ...)",
        r"(?i:\b(?:password|passwd|passphrase|passcode|pwd)\b)"
        + _PHRASE_ASSIGN
        + r"""(?P<secret>[^\s"'`]{3,127}[^\s"'`.,;:!?)\]])""",
        ("pass", "pwd"),
        _password_value,
    ),
    _rule(
        "pin-phrase",
        "A PIN given in words (PIN: 1234, my pin code is 4711)",
        r"(?i:\bpin(?:\s+(?:code|number))?\b)" + _PHRASE_ASSIGN + r"(?P<secret>\d{4,12})(?![\d\w])",
        ("pin",),
    ),
    _rule(
        "code-phrase",
        "An access, door, login or one-time code given in words (the code is 4711, door code: 12-34)",
        _NOT_A_SECRET_CODE
        + r"(?i:\bcode\b)"
        + _PHRASE_ASSIGN
        + r"(?P<secret>\d(?:[ \-]?\d){3,11})(?![\d\w])",
        ("code",),
    ),
    # -- formats rather than issuers ---------------------------------------------------------
    _rule(
        "private-key",
        "PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP)",
        # A truncated block (no END line) is still a leaked key: it runs to the end of the text.
        r"-----BEGIN" + _PEM_LABEL + r"(?:(?!-----END" + _PEM_LABEL + r")[\s\S]){32,}?"
        r"(?:-----END" + _PEM_LABEL + r"|\Z)",
        ("private key",),
        _pem_body,
    ),
    _rule(
        "jwt",
        "JSON Web Token (base64url header.payload.signature with a JSON header)",
        _L + r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*",
        ("eyj",),
        _jwt_header,
    ),
)
"""Every rule, in a stable order. Ids are part of the interface (config, logs, redaction markers)."""

RULE_IDS: frozenset[str] = frozenset(rule.id for rule in RULES)
