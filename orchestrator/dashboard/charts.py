"""Bar charts as inline SVG, drawn on the server: no script, nothing fetched, readable as a table."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.dashboard.markup import Markup, join, render

WIDTH, HEIGHT, GAP = 600, 160, 4


def bars(title: str, points: Sequence[tuple[str, float]], unit: str) -> Markup:
    """One bar per (label, value), with the values also in a table for screen readers and no-SVG."""
    top = max((value for _, value in points), default=0.0) or 1.0
    width = (WIDTH - GAP * max(len(points) - 1, 0)) / max(len(points), 1)
    rects = join(
        render(
            '<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#0b5cad">'
            "<title>{label}: {value} {unit}</title></rect>",
            x=Markup(f"{i * (width + GAP):.1f}"),
            y=Markup(f"{HEIGHT - value / top * HEIGHT:.1f}"),
            w=Markup(f"{width:.1f}"),
            h=Markup(f"{value / top * HEIGHT:.1f}"),
            label=label,
            value=f"{value:g}",
            unit=unit,
        )
        for i, (label, value) in enumerate(points)
    )
    rows = join(
        render("<tr><td>{label}</td><td>{value}</td></tr>", label=label, value=f"{value:g} {unit}")
        for label, value in points
    )
    return render(
        '<figure class="chart"><figcaption>{title}</figcaption>'
        '<svg viewBox="0 0 {w} {h}" role="img" aria-label="{title}" preserveAspectRatio="none">{rects}</svg>'
        "<details><summary>Figures</summary><table><tbody>{rows}</tbody></table></details></figure>",
        title=title,
        w=str(WIDTH),
        h=str(HEIGHT),
        rects=rects,
        rows=rows,
    )
