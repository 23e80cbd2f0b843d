"""The secret guard's corpus: seeded true positives for every rule and ordinary text with no secret.

True positives are random tokens drawn from each format's own alphabet and length (several per rule
and per variant), placed in the sentences, shell lines and JSON where such tokens turn up. Ordinary
text is prose, code, UUIDs, hex digests and git SHAs, URLs, base64 of prose, and near-miss tokens (a
wrong prefix, one character too few or too many). The tests below assert that the guard catches
every true positive and flags nothing else; ``python -m bench.guard_corpus`` prints the same corpus
as a per-rule table.
"""

from __future__ import annotations

import base64
import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from servers.memory.guard import SecretGuard
from shared.secrets.rules import RULE_IDS

if TYPE_CHECKING:
    from bench.guard_corpus import Report

SEED = 20261121
ALPHABETS = {
    "alnum": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "alpha": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "lower": "abcdefghijklmnopqrstuvwxyz",
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "upalnum": "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "lowalnum": "abcdefghijklmnopqrstuvwxyz0123456789",
    "digits": "0123456789",
    "hex": "0123456789abcdef",
    "base32": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "b64": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "url": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    "azure": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-",
}
_PLACEHOLDER = re.compile(r"\{(" + "|".join(ALPHABETS) + r"|pem|jwt|uuid):?([A-Z0-9]*)\}")
DEFAULT_CONTEXTS = (
    "$SECRET",
    "The token is $SECRET, keep it safe.",
    "export API_TOKEN=$SECRET",
    'config = {"token": "$SECRET", "retries": 3}',
    "Authorization: Bearer $SECRET\n",
    "- remember: `$SECRET` (from the operator)",
)


def _random(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {"sub": _random(rng, ALPHABETS["digits"], 8), "name": _random(rng, ALPHABETS["lower"], 7)}
    parts = [_b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, payload)]
    return ".".join([*parts, _random(rng, ALPHABETS["url"], 43)])


def _pem(rng: random.Random, kind: str) -> str:
    """A PEM block of random base64 lines.

    TRUNCATED has no END line; JSON is a PKCS#8 block with escaped newlines, as in a key file's
    ``private_key`` field; PUBLIC and CERT are not secret at all.
    """
    names = {
        "PKCS8": "PRIVATE KEY",
        "JSON": "PRIVATE KEY",
        "PGP": "PGP PRIVATE KEY BLOCK",
        "PUBLIC": "PUBLIC KEY",
        "CERT": "CERTIFICATE",
        "TRUNCATED": "RSA PRIVATE KEY",
    }
    name = names.get(kind, f"{kind} PRIVATE KEY")
    newline = "\\n" if kind == "JSON" else "\n"
    lines = [_random(rng, ALPHABETS["b64"], 64) for _ in range(rng.randint(4, 12))]
    body = newline.join([f"-----BEGIN {name}-----", *lines, _random(rng, ALPHABETS["b64"], 20) + "=="])
    if kind == "TRUNCATED":
        return body
    return f"{body}{newline}-----END {name}-----" + (newline if kind == "JSON" else "")


def expand(template: str, rng: random.Random) -> str:
    """``{alphabet:n}`` -> n random characters; ``{pem:KIND}``, ``{jwt}``, ``{uuid}`` -> a whole value."""

    def one(match: re.Match[str]) -> str:
        name, arg = match.groups()
        if name == "pem":
            return _pem(rng, arg)
        if name == "jwt":
            return _jwt(rng)
        if name == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        return _random(rng, ALPHABETS[name], int(arg))

    return _PLACEHOLDER.sub(one, template)


@dataclass(frozen=True)
class Case:
    rule_id: str
    secret: str
    misses: tuple[str, ...] = ()
    contexts: tuple[str, ...] = DEFAULT_CONTEXTS


def _github(prefix: str, rule_id: str) -> Case:
    return Case(rule_id, prefix + "{alnum:36}", (prefix + "{alnum:35}", prefix + "{alnum:37}"))


AWS_CONTEXTS = (
    "aws_secret_access_key = $SECRET",
    "AWS_SECRET_ACCESS_KEY=$SECRET",
    '{"AccessKeyId": "ASIA", "SecretAccessKey": "$SECRET"}',
    "my AWS secret key is $SECRET",
)
GCP_CONTEXT = (
    '{"type": "service_account", "project_id": "demo-1", "private_key": "$SECRET", "client_id": "1"}'
)
AZURE_CONTEXTS = (
    "DefaultEndpointsProtocol=https;AccountName=nexodata;AccountKey=$SECRET;EndpointSuffix=core.windows.net",
    "AZURE_STORAGE_KEY=$SECRET",
)
DSN_CONTEXTS = (
    "SENTRY_DSN=https://$SECRET@o{digits:6}.ingest.sentry.io/{digits:7}",
    "dsn: 'https://$SECRET@sentry.example.com/{digits:2}'",
)
PASSWORD_CONTEXTS = (
    "my password is $SECRET",
    "Password: $SECRET",
    'the wifi password is "$SECRET".',
    "passphrase = $SECRET",
    "The passcode was $SECRET, change it.",
)
PEM_CONTEXTS = ("$SECRET", "key file:\n$SECRET\n", "```\n$SECRET\n```\nThat was the deploy key.")

CASES: tuple[Case, ...] = (
    Case("aws-access-key-id", "AKIA{base32:16}", ("AKIA{base32:15}", "AKIA{base32:17}", "AKIB{base32:16}")),
    Case("aws-access-key-id", "ASIA{base32:16}"),
    Case(
        "aws-secret-access-key",
        "{b64:40}",
        (
            "aws_secret_access_key = {b64:39}",
            "aws_region = {b64:40}",
            "AWS secrets rotated in commit {hex:40}",
        ),
        AWS_CONTEXTS,
    ),
    Case("gcp-api-key", "AIza{url:35}", ("AIza{url:34}", "AIzb{url:35}", "AIza{url:36}")),
    Case("gcp-service-account-key", "{pem:JSON}", ('"private_key_id": "{hex:40}"',), (GCP_CONTEXT,)),
    Case(
        "azure-storage-key", "{b64:86}==", ("AccountKey={b64:86}=", "AccountKey={b64:40}=="), AZURE_CONTEXTS
    ),
    Case(
        "azure-ad-client-secret",
        "{alnum:3}{digits:1}Q~{azure:34}",
        ("{alnum:3}{digits:1}Q-{url:34}", "{alnum:3}{digits:1}Q~{alnum:20}"),
    ),
    Case("digitalocean-token", "dop_v1_{hex:64}", ("dop_v2_{hex:64}", "dop_v1_{hex:63}")),
    Case("digitalocean-token", "doo_v1_{hex:64}"),
    Case("digitalocean-token", "dor_v1_{hex:64}"),
    Case("databricks-token", "dapi{hex:32}", ("dapi{hex:31}", "dapx{hex:32}")),
    Case(
        "anthropic-api-key", "sk-ant-api03-{url:93}AA", ("sk-ant-api02-{url:93}AA", "sk-ant-api03-{url:92}AA")
    ),
    Case("anthropic-api-key", "sk-ant-admin01-{url:93}AA"),
    Case("openai-api-key", "sk-{alnum:20}T3BlbkFJ{alnum:20}", ("sk-{alnum:20}T3BlbkFI{alnum:20}",)),
    Case(
        "openai-project-key", "sk-proj-{url:74}T3BlbkFJ{url:74}", ("sk-proj-{url:30}", "sk-project-{url:60}")
    ),
    Case("openai-project-key", "sk-svcacct-{url:58}T3BlbkFJ{url:58}"),
    Case("huggingface-token", "hf_{alpha:34}", ("hf_{alpha:33}", "hf_{alpha:20}{digits:1}{alpha:13}")),
    Case("huggingface-org-token", "api_org_{alpha:34}", ("api_org_{alpha:35}",)),
    _github("ghp_", "github-pat"),
    _github("gho_", "github-oauth-token"),
    _github("ghu_", "github-user-token"),
    _github("ghs_", "github-app-token"),
    _github("ghr_", "github-refresh-token"),
    Case(
        "github-fine-grained-pat",
        "github_pat_{alnum:22}_{alnum:59}",
        ("github_pat_{alnum:22}_{alnum:58}", "github_pan_{alnum:22}_{alnum:59}", "ghx_{alnum:36}"),
    ),
    Case("gitlab-pat", "glpat-{url:20}", ("glpat-{url:19}", "glpad-{url:20}")),
    Case("gitlab-pat", "glpat-{url:27}.01.{lowalnum:7}"),
    Case("gitlab-pipeline-trigger-token", "glptt-{hex:40}", ("glptt-{hex:39}",)),
    Case("gitlab-runner-token", "glrt-{url:20}", ("glrt-{url:19}", "GR1348942{url:20}")),
    Case("gitlab-runner-token", "GR1348941{url:20}"),
    Case(
        "slack-bot-token",
        "xoxb-{digits:12}-{digits:13}-{alnum:24}",
        ("xoxb-{digits:6}-{digits:13}-{alnum:24}", "xoxz-{digits:12}-{digits:13}-{alnum:24}"),
    ),
    Case(
        "slack-user-token",
        "xoxp-{digits:12}-{digits:12}-{digits:13}-{hex:32}",
        ("xoxp-{digits:12}-{digits:12}-{hex:32}", "xoxq-{digits:12}-{digits:12}-{digits:13}-{hex:32}"),
    ),
    Case("slack-user-token", "xoxe-{digits:10}-{digits:11}-{digits:12}-{alnum:30}"),
    Case("slack-app-token", "xapp-1-A{upalnum:10}-{digits:13}-{hex:64}", ("xapp-1-A{upalnum:10}",)),
    Case(
        "slack-webhook-url",
        "https://hooks.slack.com/services/T{upalnum:8}/B{upalnum:10}/{alnum:24}",
        (
            "https://hooks.slack.com/services/T{upalnum:8}",
            "https://hooks.example.com/services/T{upalnum:8}/B{upalnum:10}/{alnum:24}",
        ),
    ),
    Case(
        "telegram-bot-token",
        "{digits:10}:AA{url:33}",
        ("{digits:10}:AA{url:32}", "{digits:10}:BB{url:33}", "{digits:3}:AA{url:33}"),
    ),
    Case("twilio-api-key", "SK{hex:32}", ("SK{hex:31}", "SX{hex:32}")),
    Case("sendgrid-api-key", "SG.{url:22}.{url:43}", ("SG.{url:21}.{url:43}", "SG.{url:22}.{url:42}")),
    Case("npm-token", "npm_{alnum:36}", ("npm_{alnum:35}", "npn_{alnum:36}")),
    Case("pypi-token", "pypi-AgEIcHlwaS5vcmc{url:70}", ("pypi-AgEIcHlwaS5vcmc{url:40}", "pypi-{url:80}")),
    Case("pypi-token", "pypi-AgENdGVzdC5weXBpLm9yZw{url:70}"),
    Case("hashicorp-vault-token", "hvs.{url:95}", ("hvs.{url:80}", "hvx.{url:95}")),
    Case("hashicorp-vault-token", "hvb.{url:150}"),
    Case(
        "hashicorp-terraform-token",
        "{alnum:14}.atlasv1.{url:67}",
        ("{alnum:14}.atlasv2.{url:67}", "{alnum:13}.atlasv1.{url:67}"),
    ),
    Case("pulumi-token", "pul-{hex:40}", ("pul-{hex:39}", "pul-{hex:41}")),
    Case("postman-api-key", "PMAK-{hex:24}-{hex:34}", ("PMAK-{hex:24}-{hex:33}", "PMAC-{hex:24}-{hex:34}")),
    Case("grafana-api-key", "eyJrIjoi{alnum:90}==", ("eyJrIjoi{alnum:40}", "eyJvIjoi{alnum:90}")),
    Case("grafana-cloud-token", "glc_{b64:60}=", ("glc_{b64:20}", "glx_{b64:60}")),
    Case(
        "grafana-service-account-token",
        "glsa_{alnum:32}_{hex:8}",
        ("glsa_{alnum:31}_{hex:8}", "glsa_{alnum:32}_{hex:7}"),
    ),
    Case("sentry-user-token", "sntryu_{hex:64}", ("sntryu_{hex:63}", "sentry release {hex:64}")),
    Case("sentry-user-token", "{hex:64}", (), ("SENTRY_AUTH_TOKEN=$SECRET", "sentry token: $SECRET")),
    Case(
        "sentry-org-token",
        "sntrys_eyJpYXQiO{b64:60}_{b64:43}",
        ("sntrys_eyJpYXQiO{b64:60}_{b64:42}", "sntrys_{b64:100}"),
    ),
    Case(
        "sentry-dsn",
        "{hex:32}",
        (
            "https://{hex:32}@example.com/{digits:2}",
            "https://{hex:31}@o{digits:6}.ingest.sentry.io/{digits:7}",
        ),
        DSN_CONTEXTS,
    ),
    Case("stripe-secret-key", "sk_live_{alnum:24}", ("sk_live_{alnum:9}", "pk_live_{alnum:24}")),
    Case("stripe-secret-key", "rk_test_{alnum:99}"),
    Case("shopify-access-token", "shpat_{hex:32}", ("shpat_{hex:31}", "shpxx_{hex:32}")),
    Case("shopify-access-token", "shpca_{hex:32}"),
    Case("shopify-access-token", "shppa_{hex:32}"),
    Case("shopify-shared-secret", "shpss_{hex:32}", ("shpss_{hex:33}",)),
    Case("private-key", "{pem:RSA}", ("{pem:PUBLIC}", "{pem:CERT}"), PEM_CONTEXTS),
    *(Case("private-key", f"{{pem:{kind}}}", (), PEM_CONTEXTS) for kind in ("PKCS8", "EC", "OPENSSH", "PGP")),
    Case("private-key", "{pem:TRUNCATED}", (), PEM_CONTEXTS),
    Case(
        "password-phrase",
        "{alnum:12}",
        (
            "The password is stored in 1Password.",
            "password = ${DB_PASSWORD}",
            "password: ********",
            "Store the passphrase in the keychain, the password is not needed here.",
        ),
        PASSWORD_CONTEXTS,
    ),
    Case(
        "pin-phrase",
        "{digits:4}",
        ("PIN: {digits:2}", "pin {digits:4}", "Reset the PIN in the banking app."),
        ("PIN: $SECRET", "my pin is $SECRET", "the PIN number is $SECRET.", "pin=$SECRET"),
    ),
    Case(
        "code-phrase",
        "{digits:6}",
        (
            "zip code is {digits:5}",
            "HTTP status code: {digits:3}",
            "exit code is {digits:1}",
            "the code is in the repo",
            "postal code: {digits:5}",
        ),
        (
            "the code is $SECRET",
            "Door code: $SECRET",
            "your login code is $SECRET.",
            "The alarm code was $SECRET",
        ),
    ),
    Case("jwt", "{jwt}", ("eyJ{alnum:30}.eyJ{alnum:30}.{url:43}", "eyJ{alnum:30}.{url:30}.{url:43}")),
)

# -- ordinary text -----------------------------------------------------------------------------

NAMES = ("Ana", "Luis", "Marta", "The operator", "Dr. Okafor", "My sister", "The landlord", "Kenji")
VERBS = ("prefers", "asked about", "forgot", "booked", "mentioned", "cancelled", "needs", "shared")
THINGS = (
    "the dentist appointment",
    "green tea",
    "the quarterly report",
    "a table for four",
    "the Lisbon trip",
    "the API migration",
    "the invoice from March",
    "the new GitHub token policy",
    "the AWS bill",
    "the Slack workspace",
    "the Stripe dashboard",
    "the private key rotation",
)
WHENS = ("on Tuesday", "at 10:30", "next week", "every morning", "before the 15th", "at 18:45 CET", "in 2027")
TAILS = (
    "",
    " Remind them the day before.",
    " The reference is #{digits:6}.",
    " Call +34 600 {digits:3} {digits:3}.",
    " Budget: {digits:3} EUR.",
    " See ticket ABC-{digits:4}.",
)
TRICKY = (
    "Store the GitHub token in the GITHUB_TOKEN environment variable, never in memory.",
    "The AWS secret access key lives in Vault under aws/prod; ask before using it.",
    "Rotate the Stripe key (sk_live_...) every month.",
    "A PEM file starts with -----BEGIN PRIVATE KEY----- followed by base64 lines, never paste one anywhere.",
    "The file begins with -----BEGIN RSA PRIVATE KEY----- and ends with -----END RSA PRIVATE KEY-----.",
    "The Telegram bot is @nexo_helper_bot; its token is in TELEGRAM_BOT_TOKEN.",
    "Slack webhooks look like https://hooks.slack.com/services/... and are secrets.",
    "Use the sentry DSN from SENTRY_DSN; the project id is 4504.",
    "The azure key vault is named kv-prod-weu.",
    'JWTs start with eyJ because that is base64 for {".',
    "Set aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY} in the template.",
    "Never tell anyone your PIN, not even the bank.",
    "Change your password every 90 days.",
    "Enter the code from the SMS when the site asks for it.",
    "The zip code is 28001 and the area code is 91.",
    "HTTP status code: 404 means the page is gone.",
    "The password is not required for the guest network.",
    "Did the code review happen on Tuesday?",
)
CODE = (
    'token = os.environ["{upper:6}_TOKEN"]',
    "def load_{lower:8}(self, key: str) -> str | None:\n    return self._cache.get(key)",
    "SELECT id, sha FROM commits WHERE sha = '{hex:40}';",
    "git checkout {hex:40} && git cherry-pick {hex:7}",
    "docker pull ghcr.io/acme/{lower:6}@sha256:{hex:64}",
    '"integrity": "sha512-{b64:86}=="',
    'const key = process.env.OPENAI_API_KEY ?? "";',
    'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/repos/{lower:6}/{lower:8}',
    'export AWS_SECRET_ACCESS_KEY="$(vault read -field=secret aws/creds/{lower:5})"',
    "for i in range({digits:3}):\n    total += weights[i] * values[i]",
    'logger.info("user %s logged in from %s", user_id, "10.{digits:2}.{digits:1}.{digits:2}")',
    "ssh-keygen -t ed25519 -C nexo@localhost -f ~/.ssh/id_{lower:6}",
    "stripe_key = settings.stripe_secret_key  # loaded from the vault",
    'id: "{uuid}"\nrev: {hex:12}\nchecksum: {hex:32}',
    "sk_test_mode = False",
    "hf_hub_download(repo_id='{lower:6}/{lower:8}', filename='model.onnx')",
    "xoxb_token_name = 'SLACK_BOT_TOKEN'",
    "password_hash = '$argon2id$v=19$m=65536,t=3,p=4${b64:22}${b64:43}'",
)
IDENTIFIERS = ("{uuid}", "{hex:40}", "{hex:64}", "{hex:32}", "commit {hex:40}", "sha256:{hex:64}", "{hex:7}")
URLS = (
    "https://{lower:8}.example.com/{lower:6}/{digits:4}?page={digits:2}&q={lower:5}",
    "https://github.com/{lower:6}/{lower:8}/commit/{hex:40}",
    "https://www.youtube.com/watch?v={url:11}",
    "https://docs.google.com/document/d/{url:44}/edit",
    "https://user@{lower:6}.example.org:8443/path/{lower:4}",
    "https://o{digits:6}.ingest.sentry.io/api/{digits:7}/envelope/",
    "s3://{lower:8}-backups/{digits:4}/{digits:2}/{lower:6}.tar.gz",
)


def _sentence(rng: random.Random) -> str:
    tail = expand(rng.choice(TAILS), rng)
    return f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHENS)}.{tail}"


def ordinary_corpus(seed: int = SEED, scale: int = 10) -> list[str]:
    """Text with no secret in it; ``scale`` multiplies every kind (near misses: ``scale`` per template)."""
    rng = random.Random(seed)
    corpus = [_sentence(rng) for _ in range(120 * scale)]
    corpus += list(TRICKY)
    for templates, per in ((CODE, 2 * scale), (IDENTIFIERS, 4 * scale), (URLS, 4 * scale)):
        corpus += [expand(template, rng) for template in templates for _ in range(per)]
    for _ in range(30 * scale):
        prose = _sentence(rng).encode()
        corpus.append(base64.b64encode(prose).decode())
        corpus.append(base64.urlsafe_b64encode(prose).decode().rstrip("="))
    corpus += [expand(miss, rng) for case in CASES for miss in case.misses for _ in range(scale)]
    return corpus


# -- true positives ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    rule_id: str
    text: str
    start: int
    end: int

    @property
    def secret(self) -> str:
        return self.text[self.start : self.end]


def true_positives(seed: int = SEED, per_case: int = 12) -> list[Hit]:
    """``per_case`` secrets per case, spread over the case's contexts."""
    rng = random.Random(seed)
    hits = []
    for case in CASES:
        for i in range(per_case):
            before, after = case.contexts[i % len(case.contexts)].split("$SECRET")
            before, secret, after = expand(before, rng), expand(case.secret, rng), expand(after, rng)
            hits.append(Hit(case.rule_id, before + secret + after, len(before), len(before) + len(secret)))
    return hits


# -- the assertions ---------------------------------------------------------------------------

PER_CASE = 24
SCALE = 10


@pytest.fixture(scope="module")
def report() -> Report:
    from bench.guard_corpus import evaluate  # here: the benchmark imports this module

    return evaluate(SecretGuard(), true_positives(SEED, PER_CASE), ordinary_corpus(SEED, SCALE))


def test_every_rule_has_generated_secrets_and_near_misses() -> None:
    assert (
        {case.rule_id for case in CASES},
        {case.rule_id for case in CASES if case.misses},
    ) == (set(RULE_IDS), set(RULE_IDS))


def test_every_generated_secret_is_caught_by_its_own_rule(report: Report) -> None:
    generated = {rule_id: score.generated for rule_id, score in report.scores.items()}
    print(
        f"secret guard corpus: {sum(generated.values())} secrets, {report.ordinary} ordinary texts;",
        generated,
    )
    assert report.missed == []
    assert all(score.generated >= PER_CASE for score in report.scores.values())


def test_nothing_in_the_ordinary_corpus_is_flagged(report: Report) -> None:
    assert (report.false_positives, report.ordinary > 3000) == ([], True)


def test_the_corpus_is_deterministic_for_a_seed_and_changes_with_it() -> None:
    assert true_positives(SEED, 2) == true_positives(SEED, 2)
    assert ordinary_corpus(SEED, 1) == ordinary_corpus(SEED, 1)
    assert true_positives(SEED, 2) != true_positives(SEED + 1, 2)


def test_the_benchmark_prints_the_per_rule_table_and_the_summary_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.guard_corpus import main

    assert main(["--quick"]) == 0
    out = capsys.readouterr().out
    rule_rows = [line.split(" | ") for line in out.splitlines() if line.split(" ", 1)[0] in RULE_IDS]
    assert (len(rule_rows), {row[2].strip() for row in rule_rows}) == (len(RULE_IDS), {"0"})
    assert "secret guard: secrets missed (n=1)         | 0.000 %" in out


def test_the_benchmark_rejects_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.guard_corpus import main

    assert (main(["--slow"]), capsys.readouterr().err) == (
        2,
        "usage: python -m bench.guard_corpus [--quick]\n",
    )
