"""The optional post-turn hook that asks the model what from an exchange is worth remembering.

Off by default (``agents[].memory.extract``). It is one small model call after a goal ends, counted
against the same goal's token budget: it is skipped when the goal has less than ``MIN_TOKENS`` left,
and what it spends is added to the goal's usage. What it proposes is stored through the memory
server's ``memory_remember`` tool with provenance ``agent``, so the secret guard applies as usual.
Each of those calls is reported like a tool call of the goal (a ``tool_call`` ledger entry with a
call id ``extract:N``, and the tool metrics), and counted in ``nexo_memory_extractions``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.llm import LLMError, Provider, Usage, UserMessage
from orchestrator.loop.tools import ToolObserver, render_result
from orchestrator.mesh.catalog import SEPARATOR
from shared.protocol.memory.meta import AGENT_META_KEY, PROVENANCE_META_KEY

if TYPE_CHECKING:
    from orchestrator.config.agents import AgentConfig, Budgets
    from orchestrator.loop.goal import GoalResult
    from orchestrator.mesh import ServerConnection
    from orchestrator.metrics import Metrics

logger = logging.getLogger("nexo.extract")

MIN_TOKENS = 1_500
"""Below this many tokens left in the goal's budget the hook does not run."""
MAX_ANSWER_TOKENS = 400
MAX_EXCHANGE_CHARS = 6_000
MAX_ITEM_CHARS = 500

SYSTEM = (
    "You decide what a personal agent should remember long-term from one exchange with its operator. "
    "Keep only durable facts, preferences, commitments and decisions that will matter in later "
    "conversations; never secrets, passwords, tokens or one-off chatter. Answer with a JSON array only: "
    '[{"content": "...", "tags": ["..."]}], at most MAX items, or [] when nothing is worth keeping.'
)

Remember = Callable[[str, Sequence[str]], Awaitable[None]]


@dataclass
class Extraction:
    usage: Usage = field(default_factory=Usage)
    stored: list[str] = field(default_factory=list)
    skipped: str | None = None
    """Why nothing was asked or stored (budget, provider error, unparsable answer), or None."""


def parse_items(text: str, max_items: int) -> list[tuple[str, list[str]]]:
    """The ``[{"content", "tags"}]`` array in a model's answer; anything malformed is dropped."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        raise ValueError("no JSON array in the answer")
    # A slice from "[" parses to a list or raises (JSONDecodeError is a ValueError).
    data: list[object] = json.loads(text[start : end + 1])
    items: list[tuple[str, list[str]]] = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            continue
        content = entry["content"].strip()[:MAX_ITEM_CHARS]
        raw_tags = entry.get("tags", [])
        tags = (
            [t.strip()[:40] for t in raw_tags if isinstance(t, str) and t.strip()][:8]
            if isinstance(raw_tags, list)
            else []
        )
        if content:
            items.append((content, tags))
    return items[:max_items]


async def extract_memories(
    *,
    provider: Provider,
    user_text: str,
    answer: str,
    budgets: Budgets,
    used: Usage,
    remember: Remember,
    max_items: int = 5,
) -> Extraction:
    result = Extraction()
    left = budgets.max_tokens - used.total
    if left < MIN_TOKENS:
        result.skipped = f"only {left} tokens left in the goal's budget (needs {MIN_TOKENS})"
        return result
    exchange = f"Operator:\n{user_text}\n\nAgent:\n{answer}"[-MAX_EXCHANGE_CHARS:]
    try:
        completion = await provider.complete(
            system=SYSTEM.replace("MAX", str(max_items)),
            messages=[UserMessage(exchange)],
            tools=[],
            max_tokens=min(MAX_ANSWER_TOKENS, left),
        )
    except LLMError as exc:
        result.skipped = f"the model call failed: {exc}"
        return result
    result.usage = completion.usage
    try:
        items = parse_items(completion.text or "", max_items)
    except ValueError as exc:
        result.skipped = f"unusable answer ({exc})"
        return result
    for content, tags in items:
        try:
            await remember(content, tags)
        except Exception as exc:  # noqa: BLE001 -- one refused memory (e.g. the secret guard) must not stop the rest
            logger.warning("extracted memory not stored: %s", exc)
            continue
        result.stored.append(content)
    return result


async def remember_from_turn(
    memory: ServerConnection | None,
    agent: AgentConfig,
    provider: Provider,
    user_text: str,
    answer: str,
    result: GoalResult,
    *,
    observer: ToolObserver | None = None,
    metrics: Metrics | None = None,
) -> None:
    """Store what a finished turn taught, through the memory server, as the agent's own words.

    Every ``memory_remember`` call is reported to ``observer`` (its ledger entry and tool metrics)
    and counted in ``metrics`` by outcome, as the model's own tool calls are.
    """
    if memory is None:
        return
    meta = {AGENT_META_KEY: agent.id, PROVENANCE_META_KEY: "agent"}
    tool = f"{memory.name}{SEPARATOR}memory_remember"
    calls = 0

    async def remember(content: str, tags: Sequence[str]) -> None:
        nonlocal calls
        calls += 1
        arguments = {"content": content, "tags": list(tags), "kind": "fact"}
        started = time.perf_counter()
        error: str | None = None
        try:
            outcome = await memory.call_tool("memory_remember", arguments, meta=meta)
            if outcome.is_error:
                error = render_result(outcome)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            duration_s = time.perf_counter() - started
            if observer is not None:
                await observer.on_tool(
                    f"extract:{calls}", tool, arguments, duration_s, "ok" if error is None else "error", error
                )
            if metrics is not None:
                metrics.extractions.labels(agent.id, "stored" if error is None else "refused").inc()
        if error is not None:
            raise RuntimeError(error)

    extraction = await extract_memories(
        provider=provider,
        user_text=user_text,
        answer=answer,
        budgets=agent.budgets,
        used=result.usage,
        remember=remember,
        max_items=agent.memory.extract_max_items,
    )
    result.usage = result.usage + extraction.usage
    if extraction.skipped:
        logger.info("memory extraction skipped: %s", extraction.skipped)
    elif extraction.stored:
        logger.info("memory extraction stored %d memories", len(extraction.stored))
