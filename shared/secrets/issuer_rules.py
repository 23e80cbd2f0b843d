"""Credentials whose issuer gives them a shape: a prefix, a fixed length, an embedded marker."""

from __future__ import annotations

from shared.secrets.rule import ASSIGN, END, END_URLSAFE, START, Rule, rule
from shared.secrets.validators import mixed_case_not_hex

ISSUER_RULES: tuple[Rule, ...] = (
    # -- cloud providers ---------------------------------------------------------------------
    rule(
        "aws-access-key-id",
        "AWS access key ID (AKIA/ASIA/... + 16 base32 characters)",
        START + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}" + END,
        ("a3t", "akia", "asia", "abia", "acca"),
    ),
    rule(
        "aws-secret-access-key",
        "AWS secret access key (40 base64 characters after an AWS secret keyword)",
        r"(?i:\b(?:aws|amazon)[\w .\-]{0,20}?secret[\w .\-]{0,25}?|\bsecret_?access_?key)"
        + ASSIGN
        + r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("secret",),
        mixed_case_not_hex,
    ),
    rule(
        "gcp-api-key",
        "Google Cloud API key (AIza + 35 characters)",
        START + r"AIza[A-Za-z0-9_\-]{35}" + END_URLSAFE,
        ("aiza",),
    ),
    rule(
        "gcp-service-account-key",
        "Google Cloud service-account key file (the private_key field)",
        r'"private_key"\s*:\s*"(?P<secret>-----BEGIN PRIVATE KEY-----[A-Za-z0-9+/=\\\s]{64,}?'
        r'-----END PRIVATE KEY-----(?:\\n)?)"',
        ("private_key",),
    ),
    rule(
        "azure-storage-key",
        "Azure storage account key (88 base64 characters, in a connection string or after a keyword)",
        r"(?i:AccountKey|azure[\w .\-]{0,20}?key)"
        + ASSIGN
        + r"(?<![A-Za-z0-9+/])(?P<secret>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])",
        ("accountkey", "azure"),
    ),
    rule(
        "azure-ad-client-secret",
        "Azure AD (Entra ID) client secret (3 characters, a digit, Q~, 31-34 characters)",
        r"(?<![A-Za-z0-9_~.\-])(?P<secret>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~\-])",
        ("q~",),
    ),
    rule(
        "digitalocean-token",
        "DigitalOcean personal access, OAuth or refresh token (do[opr]_v1_ + 64 hex)",
        START + r"do[opr]_v1_[a-f0-9]{64}" + END,
        ("_v1_",),
    ),
    rule(
        "databricks-token",
        "Databricks personal access token (dapi + 32 hex)",
        START + r"dapi[a-f0-9]{32}(?:-\d)?" + END,
        ("dapi",),
    ),
    # -- AI providers ------------------------------------------------------------------------
    rule(
        "anthropic-api-key",
        "Anthropic API or admin key (sk-ant-api03-/sk-ant-admin01- + 93 characters + AA)",
        START + r"sk-ant-(?:api03|admin01)-[A-Za-z0-9_\-]{93}AA" + END_URLSAFE,
        ("sk-ant-",),
    ),
    rule(
        "openai-api-key",
        "OpenAI user API key (sk- + 20 + T3BlbkFJ + 20 characters)",
        START + r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}" + END,
        ("t3blbkfj",),
    ),
    rule(
        "openai-project-key",
        "OpenAI project, service-account or admin key (sk-proj-/sk-svcacct-/sk-admin-)",
        START + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,250}" + END_URLSAFE,
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
    ),
    rule(
        "huggingface-token",
        "Hugging Face access token (hf_ + 34 letters)",
        START + r"hf_[A-Za-z]{34}" + END,
        ("hf_",),
    ),
    rule(
        "huggingface-org-token",
        "Hugging Face organisation API token (api_org_ + 34 letters)",
        START + r"api_org_[A-Za-z]{34}" + END,
        ("api_org_",),
    ),
    # -- source hosting ----------------------------------------------------------------------
    rule(
        "github-pat",
        "GitHub classic personal access token (ghp_ + 36)",
        START + r"ghp_[A-Za-z0-9]{36}" + END,
        ("ghp_",),
    ),
    rule(
        "github-oauth-token",
        "GitHub OAuth access token (gho_ + 36)",
        START + r"gho_[A-Za-z0-9]{36}" + END,
        ("gho_",),
    ),
    rule(
        "github-user-token",
        "GitHub App user-to-server token (ghu_ + 36)",
        START + r"ghu_[A-Za-z0-9]{36}" + END,
        ("ghu_",),
    ),
    rule(
        "github-app-token",
        "GitHub App installation (server-to-server) token (ghs_ + 36)",
        START + r"ghs_[A-Za-z0-9]{36}" + END,
        ("ghs_",),
    ),
    rule(
        "github-refresh-token",
        "GitHub refresh token (ghr_ + 36)",
        START + r"ghr_[A-Za-z0-9]{36}" + END,
        ("ghr_",),
    ),
    rule(
        "github-fine-grained-pat",
        "GitHub fine-grained personal access token (github_pat_ + 82)",
        START + r"github_pat_[A-Za-z0-9_]{82}" + r"(?![A-Za-z0-9_])",
        ("github_pat_",),
    ),
    rule(
        "gitlab-pat",
        "GitLab personal, project or group access token (glpat-)",
        START + r"glpat-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?" + END_URLSAFE,
        ("glpat-",),
    ),
    rule(
        "gitlab-pipeline-trigger-token",
        "GitLab pipeline trigger token (glptt- + 40 hex)",
        START + r"glptt-[a-f0-9]{40}" + END,
        ("glptt-",),
    ),
    rule(
        "gitlab-runner-token",
        "GitLab runner authentication (glrt-) or registration (GR1348941) token",
        START
        + r"(?:glrt-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?|GR1348941[A-Za-z0-9_\-]{20})"
        + END_URLSAFE,
        ("glrt-", "gr1348941"),
    ),
    # -- messaging ---------------------------------------------------------------------------
    rule(
        "slack-bot-token",
        "Slack bot token (xoxb-<team>-<bot>-...)",
        START + r"xoxb-\d{10,13}-\d{10,13}[A-Za-z0-9\-]*",
        ("xoxb-",),
    ),
    rule(
        "slack-user-token",
        "Slack user or configuration token (xoxp-/xoxe-)",
        START + r"xox[pe](?:-\d{10,13}){3}-[A-Za-z0-9\-]{28,34}" + END_URLSAFE,
        ("xoxp-", "xoxe-"),
    ),
    rule(
        "slack-app-token",
        "Slack app-level token (xapp-)",
        START + r"xapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]+" + END,
        ("xapp-",),
    ),
    rule(
        "slack-webhook-url",
        "Slack incoming-webhook or workflow URL (hooks.slack.com/services/...)",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        ("hooks.slack.com",),
    ),
    rule(
        "telegram-bot-token",
        "Telegram bot token (<bot id>:A + 34 characters)",
        START + r"\d{5,16}:A[A-Za-z0-9_\-]{34}" + END_URLSAFE,
        (":a",),
    ),
    rule(
        "twilio-api-key",
        "Twilio API key SID (SK + 32 hex)",
        START + r"SK[0-9a-fA-F]{32}" + END,
        ("sk",),
    ),
    rule(
        "sendgrid-api-key",
        "SendGrid API key (SG.<22>.<43>)",
        START + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + END_URLSAFE,
        ("sg.",),
    ),
    # -- package registries and developer platforms ------------------------------------------
    rule(
        "npm-token",
        "npm access token (npm_ + 36)",
        START + r"npm_[A-Za-z0-9]{36}" + END,
        ("npm_",),
    ),
    rule(
        "pypi-token",
        "PyPI or TestPyPI upload token (a pypi- macaroon)",
        START + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}",
        ("pypi-age",),
    ),
    rule(
        "hashicorp-vault-token",
        "HashiCorp Vault service or batch token (hvs./hvb.)",
        START + r"hv[sb]\.[A-Za-z0-9_\-]{90,300}" + END_URLSAFE,
        ("hvs.", "hvb."),
    ),
    rule(
        "hashicorp-terraform-token",
        "HashiCorp Terraform Cloud/Enterprise API token (<14>.atlasv1.<60-70>)",
        START + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}" + r"(?![A-Za-z0-9_\-=])",
        ("atlasv1",),
    ),
    rule(
        "pulumi-token",
        "Pulumi access token (pul- + 40 hex)",
        START + r"pul-[a-f0-9]{40}" + END,
        ("pul-",),
    ),
    rule(
        "postman-api-key",
        "Postman API key (PMAK-<24 hex>-<34 hex>)",
        START + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + END,
        ("pmak-",),
    ),
    rule(
        "grafana-api-key",
        'Grafana API key (base64 of {"k":"...)',
        START + r"eyJrIjoi[A-Za-z0-9+/]{70,400}={0,3}",
        ("eyjrijoi",),
    ),
    rule(
        "grafana-cloud-token",
        "Grafana Cloud access policy token (glc_)",
        START + r"glc_[A-Za-z0-9+/]{32,400}={0,3}",
        ("glc_",),
    ),
    rule(
        "grafana-service-account-token",
        "Grafana service account token (glsa_<32>_<8 hex>)",
        START + r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + END,
        ("glsa_",),
    ),
    rule(
        "sentry-user-token",
        "Sentry user auth token (sntryu_ + 64 hex, or 64 hex after a Sentry token keyword)",
        START
        + r"sntryu_[a-f0-9]{64}"
        + END
        + r"|(?i:\bsentry[\w .\-]{0,20}?(?:token|key))"
        + ASSIGN
        + r"(?<![A-Za-z0-9])(?P<secret>[a-f0-9]{64})"
        + END,
        ("sntryu_", "sentry"),
    ),
    rule(
        "sentry-org-token",
        "Sentry organisation auth token (sntrys_)",
        START + r"sntrys_eyJpYXQiO[A-Za-z0-9+/=]{10,400}_[A-Za-z0-9+/]{43}" + r"(?![A-Za-z0-9+/])",
        ("sntrys_",),
    ),
    rule(
        "sentry-dsn",
        "Sentry DSN key (the 32-hex user part of https://<key>@...sentry.../<project>)",
        r"https?://(?P<secret>[a-f0-9]{32}(?::[a-f0-9]{32})?)@[A-Za-z0-9.\-]*sentry[A-Za-z0-9.\-]*"
        r"(?::\d+)?/\d+",
        ("sentry",),
    ),
    # -- commerce ----------------------------------------------------------------------------
    rule(
        "stripe-secret-key",
        "Stripe secret or restricted key (sk_/rk_ + live/test/prod)",
        START + r"(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}" + END,
        ("sk_", "rk_"),
    ),
    rule(
        "shopify-access-token",
        "Shopify access token (shpat_/shpca_/shppa_ + 32 hex)",
        START + r"shp(?:at|ca|pa)_[a-fA-F0-9]{32}" + END,
        ("shpat_", "shpca_", "shppa_"),
    ),
    rule(
        "shopify-shared-secret",
        "Shopify app shared secret (shpss_ + 32 hex)",
        START + r"shpss_[a-fA-F0-9]{32}" + END,
        ("shpss_",),
    ),
)
