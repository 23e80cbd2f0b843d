"""Memory: hybrid search with each result's provenance, forget, MEMORY.md, its revisions and what
each revision changed (the diff comes from the memory server, where git runs)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.forms import checked_form, field
from orchestrator.dashboard.layout import button_form, empty, page, problem, when
from orchestrator.dashboard.markup import Markup, join, render

RESULTS = 20
REV = re.compile(r"[0-9a-f]{4,64}")


def diff_html(diff: str) -> Markup:
    """A unified diff, escaped line by line, with added, removed and hunk lines marked for the CSS
    (lines before the first hunk are git's header, whatever they start with)."""
    lines: list[Markup] = []
    in_hunk = False
    for text in diff.splitlines():
        in_hunk = in_hunk or text.startswith("@@")
        style = {"+": "add", "-": "del", "@": "hunk"}.get(text[:1], "same") if in_hunk else "meta"
        lines.append(render('<span class="{style}">{text}</span>\n', style=style, text=text))
    if not lines:
        return empty("This revision left MEMORY.md's text as it was.")
    return render('<pre class="diff">{lines}</pre>', lines=join(lines))


def _hit(request: Request, memory: dict[str, Any], query: str) -> Markup:
    created = datetime.fromtimestamp(float(memory["created_at"]), UTC).isoformat()
    return render(
        '<li class="card" id="memory-{id}"><p class="memory">{content}</p><dl><dt>Provenance</dt>'
        '<dd class="provenance-{prov}">{prov}</dd><dt>Kind</dt><dd>{kind}</dd><dt>Agent</dt><dd>{agent}</dd>'
        "<dt>Tags</dt><dd>{tags}</dd><dt>Saved</dt><dd>{at}</dd><dt>Id</dt><dd>{id}</dd></dl>{forget}</li>",
        id=memory["id"],
        content=memory["content"],
        prov=memory["provenance"],
        kind=memory["kind"],
        agent=memory["agent"],
        tags=", ".join(memory.get("tags") or []) or "-",
        at=when(created),
        forget=button_form(request, "/memory/forget", "Forget", danger=True, id=str(memory["id"]), q=query),
    )


async def memory(request: Request, flash: str | None = None, status: int = 200, query: str = "") -> Response:
    daemon: Daemon = request.app.state.daemon
    query = query or request.query_params.get("q", "")[:500]
    rev = request.query_params.get("rev", "").strip().lower()
    if rev and not REV.fullmatch(rev):
        return problem(
            request,
            "Memory",
            f"{rev[:80]!r} is not a revision: pick one from the list on /memory",
            status=400,
        )
    try:
        history = await daemon.request(
            daemon.memory_server, "nexo/memory/history", limit=20, **({"rev": rev} if rev else {})
        )
        found = (
            await daemon.request(daemon.memory_server, "nexo/memory/search", query=query, limit=RESULTS)
            if query.strip()
            else None
        )
    except DaemonError as exc:
        return problem(request, "Memory", str(exc))
    if found is None:
        results = empty(
            "Search what the agent remembers: words or a question; results show where each came from."
        )
    elif not found["memories"]:
        results = empty(f"Nothing remembered matches {query!r}.")
    else:
        results = render(
            '<p>{n} results ({mode}).</p><ul class="cards">{hits}</ul>',
            n=len(found["memories"]),
            mode=found["mode"],
            hits=join(_hit(request, m, query) for m in found["memories"]),
        )
    revisions = join(
        render(
            '<li>{when} <a href="/memory?rev={rev}"><code>{short}</code></a> {message}</li>',
            when=when(r["when"]),
            rev=r["rev"],
            short=r["rev"][:10],
            message=r["message"],
        )
        for r in history["revisions"]
    )
    changed = (
        render(
            '<h2 id="diff">What revision <code>{rev}</code> changed</h2>{diff}',
            rev=rev[:10],
            diff=diff_html(history.get("diff") or ""),
        )
        if rev
        else Markup("")
    )
    body = render(
        '<form method="get" action="/memory" class="filters" role="search"><label>Search <input name="q" '
        'value="{q}" type="search"></label><button type="submit">Search</button></form>{results}'
        "{changed}<h2>MEMORY.md</h2>{content}<h2>Revisions</h2>{revisions}",
        q=query,
        changed=changed,
        results=results,
        content=render("<pre>{text}</pre>", text=history["content"])
        if history["content"].strip()
        else empty("MEMORY.md is empty: consolidation copies lasting memories into it."),
        revisions=render("<ol>{items}</ol>", items=revisions)
        if history["revisions"]
        else empty("No revisions yet."),
    )
    return page(request, "Memory", body, flash=flash, status=status)


async def forget(request: Request) -> Response:
    form = await checked_form(request)
    memory_id, query = field(form, "id"), str(form.get("q") or "")[:500]
    if not memory_id.isdigit():
        return await memory(
            request, flash=f"Refused: {memory_id!r} is not a memory id", status=400, query=query
        )
    daemon: Daemon = request.app.state.daemon
    try:
        await daemon.request(daemon.memory_server, "nexo/memory/forget", id=int(memory_id))
    except DaemonError as exc:
        return await memory(request, flash=f"Refused: {exc}", status=409, query=query)
    return await memory(request, flash=f"Forgot memory {memory_id}.", query=query)
