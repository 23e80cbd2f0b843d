"""Splitting and rendering a model's Markdown: examples, then properties over generated replies."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest

from shared.channelkit.text import split_markdown, to_plain, to_slack_mrkdwn, to_telegram_html, to_whatsapp

TELEGRAM_TAGS = {"b", "i", "s", "u", "code", "pre", "a", "blockquote"}
FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")

WORDS = ["alpha", "beta", "x<y", "a&b", "say", "tail>", "ok", "3.5", 'q"t', "é", "snake_case"]
INLINE = [
    "**bold words**",
    "*it*",
    "_it too_",
    "~~gone~~",
    "`a < b`",
    "``x ` y``",
    "[the docs](https://example.org/a?b=1&c=2)",
    "[bad](javascript:alert(1))",
    "**unclosed",
    "_dangling",
    "[half](",
    "<script>",
    "**bold with `code` inside**",
]


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS + INLINE) for _ in range(rng.randint(1, 12))]
    return " ".join(words) + rng.choice([".", "!", "?", "", ":"])


def _block(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        language = rng.choice(["python", "", "sh", "c++"])
        lines = [f"    {_sentence(rng)}" for _ in range(rng.randint(1, 8))]
        return f"```{language}\n" + "\n".join(lines) + "\n```"
    if kind == 1:
        return "\n".join(f"- {_sentence(rng)}" for _ in range(rng.randint(1, 4)))
    if kind == 2:
        return "\n".join(f"{n}. {_sentence(rng)}" for n in range(1, rng.randint(2, 5)))
    if kind == 3:
        return "\n".join(f"> {_sentence(rng)}" for _ in range(rng.randint(1, 3)))
    if kind == 4:
        return f"## {_sentence(rng)}"
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 6)))


def generated_replies(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    replies = ["\n\n".join(_block(rng) for _ in range(rng.randint(1, 8))) for _ in range(count)]
    replies.append("```python\n" + "\n".join(f"print({n})" for n in range(200)))  # never closed
    replies.append("word " * 500)
    replies.append("x" * 3000)
    return replies


def _fence_balance(part: str) -> str | None:
    """The fence left open at the end of ``part``, or None when every block it opens is closed."""
    open_fence: str | None = None
    for line in part.split("\n"):
        match = FENCE_LINE.match(line)
        if match is None:
            continue
        if open_fence is None:
            open_fence = match[1]
        elif match[1][0] == open_fence[0] and len(match[1]) >= len(open_fence) and not match[2].strip():
            open_fence = None
    return open_fence


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _strip_fence_lines(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not FENCE_LINE.match(line))


@pytest.mark.parametrize("limit", [40, 97, 300, 4096])
def test_every_part_fits_is_non_empty_keeps_order_and_balances_its_fences(limit: int) -> None:
    for reply in generated_replies(60):
        parts = split_markdown(reply, limit)
        assert parts, reply
        for part in parts:
            assert 0 < len(part) <= limit, (limit, part)
            assert part.strip()
            assert _fence_balance(part) is None, (limit, part)
        assert _squash(_strip_fence_lines("\n".join(parts))) == _squash(_strip_fence_lines(reply))


def test_a_reply_that_fits_is_one_part_unchanged() -> None:
    assert split_markdown("Hello **there**.\n\nBye.", 100) == ["Hello **there**.\n\nBye."]


def test_whitespace_only_gives_no_parts() -> None:
    assert split_markdown(" \n\n  ", 10) == []
    assert all(split_markdown("```\ncode\n\n      \n", 8))  # even a limit too small for the fences
    assert split_markdown("```\ncode\n    ", 100) == ["```\ncode\n```"]


def test_cuts_prefer_paragraph_then_line_then_sentence_then_space() -> None:
    assert split_markdown("one two.\nthree\n\nfour five", 20) == ["one two.\nthree", "four five"]
    assert split_markdown("one two. three\nfour five", 20) == ["one two. three", "four five"]
    assert split_markdown("one two. three four five", 20) == ["one two.", "three four five"]
    assert split_markdown("one two three four five", 20) == ["one two three four", "five"]
    assert split_markdown("abcdefghijklmnopqrstuvwxyz", 10) == ["abcdefghij", "klmnopqrst", "uvwxyz"]


def test_an_inline_span_is_not_cut_when_a_cut_outside_it_exists() -> None:
    assert split_markdown("see **very bold words** here", 20) == ["see", "**very bold words**", "here"]
    assert split_markdown("a [link text](https://x.org/p) b", 29) == [
        "a",
        "[link text](https://x.org/p)",
        "b",
    ]
    assert split_markdown("run `ls -la /tmp` now", 16) == ["run", "`ls -la /tmp`", "now"]


def test_a_cut_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"line {n}" for n in range(6))
    parts = split_markdown(f"Intro.\n\n```python\n{code}\n```\n\nDone.", 44)
    assert parts == [
        "Intro.",
        "```python\nline 0\nline 1\nline 2\nline 3\n```",
        "```python\nline 4\nline 5\n```\n\nDone.",
    ]


def test_code_indentation_survives_a_cut() -> None:
    parts = split_markdown("```\ndef f():\n    return 1\n    pass\n```", 30)
    assert parts == ["```\ndef f():\n    return 1\n```", "```\n    pass\n```"]


def test_an_unclosed_code_block_is_closed_in_its_last_part() -> None:
    assert split_markdown("```sh\necho hi", 100) == ["```sh\necho hi\n```"]


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit 0"):
        split_markdown("text", 0)


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TELEGRAM_TAGS:
            self.problems.append(f"tag {tag}")
        if tag == "a" and not any(
            name == "href" and (value or "").startswith(("http://", "https://", "tg://", "mailto:"))
            for name, value in attrs
        ):
            self.problems.append(f"link {attrs}")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.problems.append(f"unbalanced </{tag}>")


def _check_html(html: str) -> list[str]:
    checker = _TagChecker()
    checker.feed(html)
    checker.close()
    leftover = re.sub(r'</?(b|i|s|u|code|pre|a|blockquote)( (href|class)="[^"<>]*")?>', "", html)
    problems = checker.problems + [f"open {tag}" for tag in checker.stack]
    if "<" in leftover or ">" in leftover:
        problems.append(f"raw angle bracket in {leftover!r}")
    return problems


def test_telegram_html_is_well_formed_and_escapes_every_input_bracket() -> None:
    for reply in generated_replies(150, seed=11):
        assert _check_html(to_telegram_html(reply)) == [], reply
        for part in split_markdown(reply, 120):
            assert _check_html(to_telegram_html(part)) == [], part


def test_telegram_html_renders_the_model_subset() -> None:
    md = (
        "# Title\n"
        '**b** *i* _i_ ~~s~~ `a<b` [docs](https://x.org/?a=1&b="2") [js](javascript:x)\n'
        "- one\n"
        "2. two\n"
        "> quoted **bold**\n"
        "> more\n"
        "```python\nif a < b & c:\n    pass\n```\n"
        "```\nplain\n```\n"
        "**broken and <tag> & snake_case_name"
    )
    assert to_telegram_html(md) == (
        "<b>Title</b>\n"
        '<b>b</b> <i>i</i> <i>i</i> <s>s</s> <code>a&lt;b</code> <a href="https://x.org/?a=1&amp;b=&quot;2&quot;">'
        "docs</a> [js](javascript:x)\n"
        "• one\n"
        "2. two\n"
        "<blockquote>quoted <b>bold</b>\nmore</blockquote>\n"
        '<pre><code class="language-python">if a &lt; b &amp; c:\n    pass</code></pre>\n'
        "<pre>plain</pre>\n"
        "**broken and &lt;tag&gt; &amp; snake_case_name"
    )


def test_whatsapp_markup() -> None:
    md = "## Plan\n**b** *i* ~~s~~ `x` [docs](https://x.org)\n* item\n> note\n```py\ncode\n```"
    assert to_whatsapp(md) == ("*Plan*\n*b* _i_ ~s~ `x` docs (https://x.org)\n- item\n> note\n```\ncode\n```")


def test_slack_mrkdwn_escapes_control_characters_so_no_reply_mentions_everyone() -> None:
    md = (
        "## Plan\n**b** *i* ~~s~~ `a<b` [docs](https://x.org) [js](javascript:x) <!channel> & <@U1>\n"
        "* item\n> note\n```py\nif a < b:\n```"
    )
    assert to_slack_mrkdwn(md) == (
        "*Plan*\n*b* _i_ ~s~ `a&lt;b` <https://x.org|docs> [js](javascript:x) &lt;!channel&gt; &amp; "
        "&lt;@U1&gt;\n• item\n> note\n```\nif a &lt; b:\n```"
    )


def test_plain_text_drops_markers_and_spells_links_out() -> None:
    md = "# Plan\n**b** _i_ ~~s~~ `x` [docs](https://x.org) <https://y>\n+ item\n```\ncode\n```"
    assert to_plain(md) == "Plan\nb i s x docs (https://x.org) <https://y>\n- item\ncode"


def test_renderers_never_lose_words() -> None:
    for reply in generated_replies(60, seed=5):
        words = set(re.findall(r"[a-z]{4,}", _strip_fence_lines(reply).replace("javascript", "")))
        for rendered in (to_plain(reply), to_whatsapp(reply), to_slack_mrkdwn(reply)):
            missing = {word for word in words if word not in rendered}
            assert not missing, (reply, missing)
