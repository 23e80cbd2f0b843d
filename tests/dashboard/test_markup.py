"""Every value placed in a page is text: escaped in element content and in attributes alike."""

from __future__ import annotations

from orchestrator.dashboard.feed import FeedFilter, entry_html
from orchestrator.dashboard.markup import Markup, esc, render
from orchestrator.dashboard.memory import diff_html


def test_values_are_escaped_and_only_markup_passes_as_is() -> None:
    hostile = '"><script>alert(1)</script>'
    html = render('<a title="{t}">{t}</a>{safe}', t=hostile, safe=Markup("<b>kept</b>"))
    assert html == (
        '<a title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">'
        "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a><b>kept</b>"
    )
    assert esc(None) == ""
    assert esc(esc("<")) == "&lt;"


def test_a_ledger_entry_renders_inert_whatever_its_fields_hold() -> None:
    entry = {
        "seq": 7,
        "at": "2026-11-26T07:00:00.000001+00:00",
        "kind": "channel",
        "source": "channel:<img src=x onerror=alert(1)>",
        "agent": "nexo",
        "goal_id": '"><script>',
        "subject": "in <script>alert(1)</script>",
        "body": {},
    }
    html = entry_html(entry)
    assert "<script>" not in html
    assert "<img" not in html
    assert 'id="e7" data-seq="7"' in html
    assert "in &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_feed_filter_matches_agent_channel_kind_and_goal() -> None:
    entry = {"agent": "nexo", "source": "channel:console", "kind": "channel", "goal_id": "g-1"}
    assert FeedFilter.of({"agent": "nexo", "channel": "console", "kind": "channel", "goal": "g-1"}).matches(
        entry
    )
    assert not FeedFilter.of({"channel": "inbox"}).matches(entry)
    assert not FeedFilter.of({"kind": "turn"}).matches(entry)
    assert not FeedFilter.of({"agent": "other"}).matches(entry)
    assert not FeedFilter.of({"goal": "g-2"}).matches(entry)


def test_a_revision_diff_is_escaped_with_added_removed_and_hunk_lines_marked() -> None:
    diff = (
        "diff --git a/MEMORY.md b/MEMORY.md\n--- a/MEMORY.md\n+++ b/MEMORY.md\n@@ -1,3 +1,3 @@\n"
        " ## People\n--- old <i>x</i>\n+- new <script>alert(1)</script>\n"
    )
    assert diff_html(diff) == (
        '<pre class="diff"><span class="meta">diff --git a/MEMORY.md b/MEMORY.md</span>\n'
        '<span class="meta">--- a/MEMORY.md</span>\n<span class="meta">+++ b/MEMORY.md</span>\n'
        '<span class="hunk">@@ -1,3 +1,3 @@</span>\n<span class="same"> ## People</span>\n'
        '<span class="del">--- old &lt;i&gt;x&lt;/i&gt;</span>\n'
        '<span class="add">+- new &lt;script&gt;alert(1)&lt;/script&gt;</span>\n</pre>'
    )
    assert diff_html("") == '<p class="empty">This revision left MEMORY.md&#x27;s text as it was.</p>'
