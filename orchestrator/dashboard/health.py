"""Health: each server's state, restarts and last error, the ledger's verify result, the kill switch."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.forms import checked_form
from orchestrator.dashboard.layout import button_form, page, problem, session_of
from orchestrator.dashboard.markup import Markup, join, render


def _server(row: dict[str, Any]) -> Markup:
    return render(
        '<tr><td>{name}</td><td>{transport}</td><td class="state-{state}">{state}</td><td>{restarts}</td>'
        "<td>{error}</td></tr>",
        name=row.get("name"),
        transport=row.get("transport"),
        state=row.get("state"),
        restarts=row.get("restarts", 0),
        error=row.get("last_error") or "-",
    )


def _counters(counters: dict[str, Any]) -> Markup:
    """The figures `nexo status` shows, one row per metric and label set."""
    rows = join(
        render(
            "<tr><td><code>{name}</code></td><td>{labels}</td><td>{value}</td></tr>",
            name=name,
            labels=", ".join(f"{k}={v}" for k, v in sorted(row.items()) if k != "value") or "-",
            value=f"{float(row.get('value', 0)):g}",
        )
        for name, samples in sorted(counters.items())
        for row in samples
    )
    return render(
        '<div class="scroll"><table><thead><tr><th>Metric</th><th>Labels</th><th>Value</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


async def health(request: Request, flash: str | None = None) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        status = await daemon.status()
        report = (await daemon.request(daemon.audit_server, "nexo/audit/verify"))["report"]
    except DaemonError as exc:
        return problem(request, "Health", str(exc))
    autonomy = status.get("autonomy") or {}
    paused = not autonomy.get("enabled", True)
    switch = (
        button_form(request, "/autonomy", "Resume autonomy", switch="resume")
        if paused
        else button_form(request, "/autonomy", "Pause autonomy (kill switch)", danger=True, switch="pause")
    )
    chain = (
        render("intact: {n} entries checked, head {seq}", n=report["checked"], seq=report["head"]["seq"])
        if report["ok"]
        else render("BROKEN: {problem}", problem=report.get("problem"))
    )
    warnings = join(render('<li class="warning">{w}</li>', w=w) for w in status.get("warnings", []))
    body = render(
        '<ul class="warnings">{warnings}</ul>'
        "<p>nexo pid {pid}, up {uptime} s, config <code>{config}</code>.</p>"
        "<h2>Autonomy</h2><p>{autonomy}</p>{switch}<h2>Audit chain</h2><p>{chain}</p>"
        '<h2>Servers</h2><div class="scroll"><table><thead><tr><th>Server</th><th>Transport</th>'
        "<th>State</th>"
        "<th>Restarts</th><th>Last error</th></tr></thead><tbody>{servers}</tbody></table></div>"
        "<h2>Metrics</h2><p>Prometheus: {metrics}</p>{counters}",
        warnings=warnings,
        pid=status.get("pid"),
        uptime=status.get("uptime_s"),
        config=status.get("config"),
        autonomy=f"paused by {autonomy.get('paused_by')}" if paused else "running",
        switch=switch,
        chain=chain,
        servers=join(_server(row) for row in status.get("servers", [])),
        metrics=(status.get("metrics") or {}).get("url") or "not served (set metrics.port)",
        counters=_counters((status.get("metrics") or {}).get("counters") or {}),
    )
    return page(request, "Health", body, flash=flash)


async def autonomy(request: Request) -> Response:
    form = await checked_form(request)
    action = form.get("switch")
    if action not in ("pause", "resume"):
        return await health(request, flash=f"Refused: unknown action {action!r}")
    daemon: Daemon = request.app.state.daemon
    by = f"dashboard:{session_of(request).operator}"
    try:
        await daemon.op({"op": "autonomy", "action": action, "by": by})
    except DaemonError as exc:
        return await health(request, flash=f"Refused: {exc}")
    return await health(request, flash=f"Autonomy {'paused' if action == 'pause' else 'resumed'}.")
