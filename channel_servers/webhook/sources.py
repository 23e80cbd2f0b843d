"""Webhook sources: their configuration, its validation, and where each value of a request comes from.

Sources are read from a YAML or JSON file (``NEXO_WEBHOOK_SOURCES_FILE``) or a JSON list
(``NEXO_WEBHOOK_SOURCES``). Secrets never come from there: each source names the environment
variable holding its secret, which is read once at start and never logged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from channel_servers.webhook.verify import (
    BODY_ONLY,
    CONFIGURABLE_HEADER,
    Headers,
    Scheme,
    Verifier,
    make_verifier,
)
from shared.protocol.channel import SOURCE_NAME_PATTERN

MiB = 1024 * 1024
NAME_PATTERN = SOURCE_NAME_PATTERN
PATH_PATTERN = r"^(/[A-Za-z0-9_.~-]+)+$"
ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
HEADER_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
JSON_PATH_RE = re.compile(r"^\$(\.[A-Za-z0-9_-]+)+$")

DEFAULT_DELIVERY_ID: Mapping[Scheme, tuple[str, ...]] = {
    "github": ("X-GitHub-Delivery",),
    "stripe": ("$.id",),
    "slack": ("$.event_id",),
    "standard-webhooks": ("webhook-id",),
}
DEFAULT_EVENT_KIND: Mapping[Scheme, tuple[str, ...]] = {
    "github": ("X-GitHub-Event",),
    "stripe": ("$.type",),
    "slack": ("$.event.type", "$.type"),
    "standard-webhooks": ("$.type",),
}


class SourcesError(Exception):
    """The sources cannot be used as configured; the message names the source, the key and the fix."""


def _locator_spec(value: str | None) -> str | None:
    if value is None or HEADER_RE.match(value) or JSON_PATH_RE.match(value):
        return value
    raise ValueError(f"{value!r} is neither a header name nor a JSON path like $.data.id")


class SourceConfig(BaseModel):
    """One webhook source as written in the sources file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    path: str = Field(pattern=PATH_PATTERN)
    scheme: Scheme
    secret_env: str = Field(pattern=ENV_PATTERN)
    signature_header: str | None = Field(None, pattern=HEADER_RE.pattern)
    signature_prefix: str = Field("", max_length=32)
    delivery_id: str | None = None
    event_kind: str | None = None
    replay_window_s: int = Field(300, ge=1, le=86_400)
    max_body_bytes: int = Field(MiB, ge=1, le=64 * MiB)
    max_concurrency: int = Field(8, ge=1, le=1024)
    read_timeout_s: float = Field(10.0, gt=0, le=300)
    rate_per_minute: int = Field(600, ge=1, le=1_000_000)
    chat_id: str | None = Field(None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _consistent(self) -> SourceConfig:
        _locator_spec(self.delivery_id)
        _locator_spec(self.event_kind)
        if self.scheme in ("hmac-sha256", "hmac-sha1") and self.signature_header is None:
            raise ValueError(f"scheme {self.scheme} needs signature_header (e.g. X-Signature)")
        if self.scheme not in CONFIGURABLE_HEADER and (self.signature_header or self.signature_prefix):
            raise ValueError(
                f"scheme {self.scheme} has fixed headers: remove signature_header and signature_prefix "
                "(they apply to hmac-sha256, hmac-sha1 and token)"
            )
        return self


@dataclass(frozen=True, slots=True)
class Locator:
    """A request header (``X-GitHub-Delivery``) or a JSON path into the body (``$.data.id``)."""

    spec: str

    def find(self, headers: Headers, document: object) -> str | None:
        if not self.spec.startswith("$."):
            value = headers.get(self.spec.lower())
            return None if value is None else value.strip() or None
        node = document
        for step in self.spec[2:].split("."):
            if isinstance(node, Mapping):
                node = node.get(step)
            elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
                node = node[int(step)]
            else:
                return None
        if isinstance(node, bool) or not isinstance(node, str | int | float):
            return None
        return str(node).strip() or None


def find_first(locators: Sequence[Locator], headers: Headers, document: object) -> str | None:
    for locator in locators:
        value = locator.find(headers, document)
        if value is not None:
            return value
    return None


@dataclass(frozen=True, slots=True)
class Source:
    """A configured source ready to receive: its verifier built, its locators resolved."""

    config: SourceConfig
    verifier: Verifier
    delivery_locators: tuple[Locator, ...]
    kind_locators: tuple[Locator, ...]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return self.config.path

    @property
    def chat_id(self) -> str:
        return self.config.chat_id or self.config.name

    @property
    def body_is_identity(self) -> bool:
        """True when only the body is signed, so a body seen before under a new id is a replay."""
        return self.config.scheme in BODY_ONLY


def _label(raw: object, index: int) -> str:
    name = raw.get("name") if isinstance(raw, Mapping) else None
    return f"webhook source {name!r}" if isinstance(name, str) else f"webhook source #{index + 1}"


def _problems(label: str, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        key = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{label}: key {key!r}: {message}" if key else f"{label}: {message}")
    return "; ".join(lines)


def parse_config(raw: object, index: int) -> SourceConfig:
    label = _label(raw, index)
    if not isinstance(raw, Mapping):
        raise SourcesError(f"{label}: expected a mapping of keys (name, path, scheme, secret_env, ...)")
    if "secret" in raw:
        raise SourcesError(
            f"{label}: key 'secret': secrets never come from the sources file; put the secret in an "
            "environment variable and name that variable with secret_env"
        )
    try:
        return SourceConfig.model_validate(raw)
    except ValidationError as exc:
        raise SourcesError(_problems(label, exc)) from None


def build_source(config: SourceConfig, environ: Mapping[str, str]) -> Source:
    secret = environ.get(config.secret_env, "")
    if not secret:
        raise SourcesError(
            f"webhook source {config.name!r}: key 'secret_env': the environment variable "
            f"{config.secret_env} is empty or not set; export it with the source's {config.scheme} secret "
            "(every source needs one, and requests are refused without a valid signature or token)"
        )
    try:
        verifier = make_verifier(
            config.scheme,
            secret,
            window_s=config.replay_window_s,
            header=config.signature_header,
            prefix=config.signature_prefix,
        )
    except ValueError as exc:
        raise SourcesError(
            f"webhook source {config.name!r}: key 'secret_env': the secret in {config.secret_env} is "
            f"unusable: {exc}"
        ) from None
    delivery = (config.delivery_id,) if config.delivery_id else DEFAULT_DELIVERY_ID.get(config.scheme, ())
    kind = (config.event_kind,) if config.event_kind else DEFAULT_EVENT_KIND.get(config.scheme, ())
    return Source(
        config=config,
        verifier=verifier,
        delivery_locators=tuple(Locator(spec) for spec in delivery),
        kind_locators=tuple(Locator(spec) for spec in kind),
    )


def _entries(document: object, origin: str) -> list[object]:
    if isinstance(document, Mapping) and set(document) == {"sources"}:
        document = document["sources"]
    if not isinstance(document, list):
        raise SourcesError(
            f"{origin}: expected a list of sources, or a mapping with the single key 'sources'"
        )
    return document


def read_sources_file(path: Path) -> list[object]:
    origin = f"NEXO_WEBHOOK_SOURCES_FILE={path}"
    try:
        text = path.expanduser().read_text()
    except OSError as exc:
        raise SourcesError(f"{origin}: cannot read the file ({exc.strerror}); check the path") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourcesError(f"{origin}: not valid YAML or JSON: {exc}") from None
    return _entries(document, origin)


def load_sources(
    entries: Sequence[object] | None, sources_file: Path | None, environ: Mapping[str, str]
) -> tuple[Source, ...]:
    """Validate every source and resolve its secret; raise :class:`SourcesError` on the first problem."""
    if entries is not None and sources_file is not None:
        raise SourcesError(
            "both NEXO_WEBHOOK_SOURCES and NEXO_WEBHOOK_SOURCES_FILE are set; keep only one of them"
        )
    raw: list[object] = []
    if sources_file is not None:
        raw = read_sources_file(sources_file)
    elif entries is not None:
        raw = _entries(list(entries), "NEXO_WEBHOOK_SOURCES")
    if not raw:
        raise SourcesError(
            "no webhook sources are configured: list them in a file named by NEXO_WEBHOOK_SOURCES_FILE "
            "or as JSON in NEXO_WEBHOOK_SOURCES (see docs/webhooks.md)"
        )
    configs = [parse_config(entry, index) for index, entry in enumerate(raw)]
    for key in ("name", "path"):
        seen: set[str] = set()
        for config in configs:
            value = getattr(config, key)
            if value in seen:
                raise SourcesError(f"webhook source {config.name!r}: key {key!r}: {value!r} is used twice")
            seen.add(value)
    return tuple(build_source(config, environ) for config in configs)
