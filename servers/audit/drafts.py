"""Entries before they are chained: checking what clients append, and the bodies only the server writes."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, ValidationError

from servers.audit.errors import InvalidEntry
from servers.audit.redaction import redact_draft
from shared.protocol.audit.bodies import KIND_BODIES, Body
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.terms import ENTRY_KINDS, MAX_SUBJECT, GoalKind, GoalStatus
from shared.protocol.sources import SOURCE_EXAMPLES, is_source

AGENT_RE = re.compile(r"^([a-z][a-z0-9_-]{0,31})?$")
GOAL_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
RESERVED_KINDS: dict[str, str] = {
    "goal": "goal entries are written by the goal registry: call nexo/audit/goals/update",
    "checkpoint": "checkpoints are written by retention: call nexo/audit/trim",
}


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidEntry(message)


def validate_draft(draft: EntryDraft) -> Body:
    """The draft's body as its kind's model; InvalidEntry naming what is wrong otherwise."""
    kind = draft.kind
    _check(kind in ENTRY_KINDS, f"unknown kind {kind!r}: use one of {', '.join(ENTRY_KINDS)}")
    _check(kind in KIND_BODIES, f"kind {kind!r} cannot be appended: {RESERVED_KINDS.get(kind)}")
    _check(
        is_source(draft.source),
        f"source {draft.source!r} is not a source name: use e.g. {SOURCE_EXAMPLES}",
    )
    _check(
        kind != "channel" or draft.source.startswith("channel:"),
        f"a channel entry needs source 'channel:<server>'; got {draft.source!r}",
    )
    _check(bool(AGENT_RE.match(draft.agent)), f"agent {draft.agent!r} is not an agent id (a-z, 0-9, _ -)")
    _check(
        draft.goal_id is None or bool(GOAL_ID_RE.match(draft.goal_id)),
        f"goal_id {draft.goal_id!r} is not a goal id (letters, digits, '_.:-', up to 64)",
    )
    _check(kind != "turn" or draft.goal_id is not None, "a turn entry needs a goal_id")
    _check(
        len(draft.subject) <= MAX_SUBJECT,
        f"subject is {len(draft.subject)} characters; keep it to {MAX_SUBJECT} (details go in the body)",
    )
    try:
        return KIND_BODIES[kind].model_validate(draft.body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise InvalidEntry(f"invalid {kind} body: {problems}") from None


def checked_draft(draft: EntryDraft) -> tuple[EntryDraft, Body]:
    """The draft with its secrets redacted, and its validated body: what the ledger may store."""
    redacted = redact_draft(draft)
    return redacted, validate_draft(redacted)


class GoalBody(Body):
    """A goal status change, written by the goal registry."""

    status: GoalStatus
    previous: GoalStatus | None
    goal_kind: GoalKind
    reason: Annotated[str, Field(max_length=4000)] = ""


class CheckpointBody(Body):
    """What a retention trim removed, written by retention (see retention.py)."""

    removed: int = Field(ge=1)
    first_seq: int = Field(ge=1)
    last_seq: int = Field(ge=1)
    last_removed_hash: str
    ranges: int = Field(ge=1)
    """How many removed seq ranges the ledger records after this trim (all trims so far)."""
    ranges_digest: str
    turns_per_goal: int | None = None
    max_age_s: float | None = None


INTERNAL_BODIES: dict[type[Body], str] = {GoalBody: "goal", CheckpointBody: "checkpoint"}


def internal_draft(
    body: GoalBody | CheckpointBody, *, source: str, agent: str = "", goal_id: str | None = None, subject: str
) -> EntryDraft:
    """A draft of an entry only the server writes (never validated as an append)."""
    return EntryDraft(
        kind=INTERNAL_BODIES[type(body)],
        source=source,
        agent=agent,
        goal_id=goal_id,
        subject=subject,
        body=body.model_dump(mode="json"),
    )
