"""Reading a state-changing form: refused unless it carries the session's CSRF token."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from orchestrator.dashboard.layout import keyring_of, session_of

MAX_FORM_FIELDS = 20


async def checked_form(request: Request) -> FormData:
    """The posted form, or HTTP 403 when its ``csrf`` field is missing or not this session's."""
    form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
    if not keyring_of(request).csrf_ok(session_of(request), form.get("csrf")):
        raise HTTPException(403, "refused: the form's CSRF token is missing or stale; reload the page")
    return form


def field(form: FormData, name: str, limit: int = 200) -> str:
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        raise HTTPException(400, f"the form has no {name!r}")
    return value.strip()[:limit]
