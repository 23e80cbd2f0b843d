"""The Bot API stand-in answers as Telegram documents it (what the channel's tests rely on)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest

from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.fakes.telegram_html import EntityError, parse_html

pytestmark = pytest.mark.anyio

ANA = 5550001


async def call(http: httpx2.AsyncClient, method: str, token: str = TOKEN, **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = (await http.post(f"/bot{token}/{method}", json=params)).json()
    return answer


async def test_the_documented_error_answers() -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.blocked.add(ANA)
    async with fake.serve() as url, httpx2.AsyncClient(base_url=url) as http:
        wrong = await call(http, "getMe", token="1:wrong")
        blocked = await call(http, "sendMessage", chat_id=ANA, text="hi")
        unknown = await call(http, "sendMessage", chat_id=42, text="hi")
        fake.blocked.clear()
        too_long = await call(http, "sendMessage", chat_id=ANA, text="x" * 4097)
        fits = await call(
            http, "sendMessage", chat_id=ANA, text="<b>" + "x" * 4096 + "</b>", parse_mode="HTML"
        )
        bad_button = await call(
            http,
            "sendMessage",
            chat_id=ANA,
            text="pick",
            reply_markup={"inline_keyboard": [[{"text": "A", "callback_data": "x" * 65}]]},
        )
        await call(http, "setWebhook", url="https://bot.example/telegram", secret_token="s" * 20)
        conflict = await call(http, "getUpdates")
        await call(http, "deleteWebhook")
        fake.fail_next("getUpdates", 429, "Too Many Requests: retry after 7", retry_after=7)
        limited = await call(http, "getUpdates")
    assert wrong == {"ok": False, "error_code": 401, "description": "Unauthorized"}
    assert blocked["description"] == "Forbidden: bot was blocked by the user"
    assert unknown == {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
    assert too_long["description"] == "Bad Request: message is too long"
    assert fits["ok"]
    assert bad_button["description"] == "Bad Request: BUTTON_DATA_INVALID"
    assert conflict["error_code"] == 409
    assert limited["parameters"] == {"retry_after": 7}


async def test_updates_below_the_offset_are_confirmed_and_a_long_poll_waits_for_new_ones() -> None:
    fake = FakeTelegram()
    async with fake.serve() as url, httpx2.AsyncClient(base_url=url, timeout=10) as http:
        first = fake.inject(fake.message(ANA, "one"))
        batch = await call(http, "getUpdates", offset=0)
        async with anyio.create_task_group() as tg:
            waiting: list[dict[str, Any]] = []

            async def poll() -> None:
                waiting.append(await call(http, "getUpdates", offset=first + 1, timeout=5))

            tg.start_soon(poll)
            await fake.called("getUpdates", 2)
            second = fake.inject(fake.message(ANA, "two"))
        after = await call(http, "getUpdates", offset=second + 1)
    assert [update["update_id"] for update in batch["result"]] == [first]
    assert [update["update_id"] for update in waiting[0]["result"]] == [second]
    assert after["result"] == []
    assert fake.confirmed_offset == second + 1


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<b>bold", "can't parse entities: Can't find end tag corresponding to start tag \"b\""),
        (
            "<b><i>x</b></i>",
            'can\'t parse entities: Unmatched end tag at byte offset 7, expected "</i>", found "</b>"',
        ),
        ("a < b", "can't parse entities: Unsupported start tag at byte offset 2"),
        ("fish & chips", "can't parse entities: Character '&' must be escaped"),
        ("<div>x</div>", 'can\'t parse entities: Unsupported start tag "div" at byte offset 0'),
    ],
)
def test_html_that_telegram_refuses_is_refused(text: str, error: str) -> None:
    with pytest.raises(EntityError) as raised:
        parse_html(text)
    assert str(raised.value).startswith(error)


def test_html_that_telegram_accepts_parses_to_its_plain_text() -> None:
    text = (
        '<b>a</b> &lt;<a href="https://x.example">link</a>&gt; '
        '<pre><code class="language-py">1 &amp; 2</code></pre>'
    )
    assert parse_html(text) == "a <link> 1 & 2"
