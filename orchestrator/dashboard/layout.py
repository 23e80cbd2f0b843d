"""The frame every page shares: navigation, flash line, forms with their CSRF field, times."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from orchestrator.dashboard.auth import Keyring, Session
from orchestrator.dashboard.markup import Markup, join, render

PAGES = (
    ("/", "Activity"),
    ("/goals", "Goals"),
    ("/approvals", "Approvals"),
    ("/people", "People"),
    ("/memory", "Memory"),
    ("/schedules", "Schedules"),
    ("/spend", "Spend"),
    ("/health", "Health"),
)

_FRAME = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · nexo</title>
<link rel="stylesheet" href="/static/dashboard.css">
<script src="/static/dashboard.js" defer></script>
</head><body>
<a class="skip" href="#main">Skip to content</a>
<header><strong class="brand">nexo</strong><nav aria-label="Pages"><ul>{nav}</ul></nav>
<span class="who">{operator} {logout}</span></header>
<main id="main" tabindex="-1"><h1>{title}</h1>{flash}{body}</main>
</body></html>"""


def session_of(request: Request) -> Session:
    session: Session = request.state.session
    return session


def keyring_of(request: Request) -> Keyring:
    keyring: Keyring = request.app.state.keyring
    return keyring


def csrf_field(request: Request) -> Markup:
    token = keyring_of(request).csrf_token(session_of(request))
    return render('<input type="hidden" name="csrf" value="{token}">', token=token)


def button_form(
    request: Request, action: str, label: str, /, *, danger: bool = False, **fields: str
) -> Markup:
    """A POST form of one button (with hidden ``fields``): works without JS, keyboard included."""
    hidden = join(
        render('<input type="hidden" name="{name}" value="{value}">', name=name, value=value)
        for name, value in fields.items()
    )
    return render(
        '<form method="post" action="{action}" class="inline">{csrf}{hidden}'
        '<button type="submit"{cls}>{label}</button></form>',
        action=action,
        csrf=csrf_field(request),
        hidden=hidden,
        label=label,
        cls=Markup(' class="danger"' if danger else ""),
    )


def when(iso: str | None) -> Markup:
    """A timestamp the script shows in the browser's time zone (UTC without it)."""
    if not iso:
        return Markup("-")
    return render('<time datetime="{iso}">{text} UTC</time>', iso=iso, text=iso[:19].replace("T", " "))


def page(
    request: Request, title: str, body: Markup, *, status: int = 200, flash: str | None = None
) -> HTMLResponse:
    """A whole page; ``flash`` is the outcome of the form just sent, said first."""
    current = request.url.path
    nav = join(
        render(
            '<li><a href="{href}"{current}>{label}</a></li>',
            href=href,
            label=label,
            current=Markup(' aria-current="page"' if current == href else ""),
        )
        for href, label in PAGES
    )
    flash_html = (
        render('<p class="flash" role="status">{text}</p>', text=flash[:300]) if flash else Markup("")
    )
    html = render(
        _FRAME,
        title=title,
        nav=nav,
        operator=session_of(request).operator,
        logout=button_form(request, "/logout", "Log out"),
        flash=flash_html,
        body=body,
    )
    return HTMLResponse(html, status_code=status)


def empty(text: str) -> Markup:
    return render('<p class="empty">{text}</p>', text=text)


def problem(request: Request, title: str, text: str, status: int = 503) -> HTMLResponse:
    return page(request, title, render('<p class="error" role="alert">{text}</p>', text=text), status=status)
