"""The post-turn extraction hook: one small, budgeted model call whose proposals go to memory."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from orchestrator.config.agents import Budgets
from orchestrator.llm import Usage
from orchestrator.loop.extract import MIN_TOKENS, extract_memories, parse_items
from tests.fakes.llm import Fail, FakeLLM, Reply
from tests.orchestrator.llm.support import VirtualTime, openai

pytestmark = pytest.mark.anyio


class Memory:
    def __init__(self, refuse: str | None = None) -> None:
        self.items: list[tuple[str, list[str]]] = []
        self.refuse = refuse

    async def remember(self, content: str, tags: Sequence[str]) -> None:
        if self.refuse is not None and self.refuse in content:
            raise RuntimeError("blocked by the secret guard")
        self.items.append((content, list(tags)))


async def test_proposed_memories_are_stored_and_the_call_is_counted() -> None:
    answer = 'Here: [{"content": "Operator prefers tea", "tags": ["drinks"]}, {"content": "Lives in Lyon"}]'
    memory = Memory()
    with FakeLLM([Reply(answer)]) as fake:
        provider = openai(fake, VirtualTime())
        try:
            result = await extract_memories(
                provider=provider,
                user_text="I like tea, not coffee. I moved to Lyon.",
                answer="Noted.",
                budgets=Budgets(),
                used=Usage(100, 20),
                remember=memory.remember,
            )
        finally:
            await provider.aclose()
        request = fake.requests[0]
    assert memory.items == [("Operator prefers tea", ["drinks"]), ("Lives in Lyon", [])]
    assert result.stored == ["Operator prefers tea", "Lives in Lyon"]
    assert result.usage.total > 0
    assert result.skipped is None
    assert request.tool_names == []
    assert request.last_user_text is not None
    assert "I moved to Lyon" in request.last_user_text


async def test_no_call_is_made_when_the_goal_budget_is_nearly_spent() -> None:
    with FakeLLM([]) as fake:
        provider = openai(fake, VirtualTime())
        try:
            result = await extract_memories(
                provider=provider,
                user_text="hi",
                answer="hello",
                budgets=Budgets(max_tokens=MIN_TOKENS + 10),
                used=Usage(20, 0),
                remember=Memory().remember,
            )
        finally:
            await provider.aclose()
        assert fake.requests == []
    assert result.skipped == f"only {MIN_TOKENS - 10} tokens left in the goal's budget (needs {MIN_TOKENS})"


async def test_a_refused_item_does_not_stop_the_others_and_errors_are_reported() -> None:
    answer = '[{"content": "token is ghp_x"}, {"content": "likes jazz"}]'
    memory = Memory(refuse="ghp_")
    with FakeLLM([Reply(answer), Reply("nothing to add"), Fail(400)]) as fake:
        provider = openai(fake, VirtualTime(), max_retries=0)
        try:
            kept = await extract_memories(
                provider=provider,
                user_text="a",
                answer="b",
                budgets=Budgets(),
                used=Usage(),
                remember=memory.remember,
            )
            unparsable = await extract_memories(
                provider=provider,
                user_text="a",
                answer="b",
                budgets=Budgets(),
                used=Usage(),
                remember=memory.remember,
            )
            failed = await extract_memories(
                provider=provider,
                user_text="a",
                answer="b",
                budgets=Budgets(),
                used=Usage(),
                remember=memory.remember,
            )
        finally:
            await provider.aclose()
    assert kept.stored == ["likes jazz"]
    assert unparsable.skipped == "unusable answer (no JSON array in the answer)"
    assert failed.skipped is not None
    assert failed.skipped.startswith("the model call failed: ")


def test_parse_items_keeps_well_formed_entries_and_caps_their_number() -> None:
    text = (
        '[{"content": " a "}, {"content": 3}, "x", {"content": "b", "tags": ["t", 5, " "]}, {"content": "c"}]'
    )
    assert parse_items(text, 2) == [("a", []), ("b", ["t"])]
    with pytest.raises(ValueError, match="Extra data"):
        parse_items('[1] {"a": [2]}', 5)
    with pytest.raises(ValueError, match="no JSON array"):
        parse_items("nothing ] here [", 5)
