"""Ten thousand crafted events from strangers and spoofers in a running mesh: none reaches the model.

A nexo channel driven over a socket (tests/fakes/inbox_channel.py) plays every sender; the pairing,
audit and memory servers are the real ones. The corpus is tests/mesh/pairing_corpus.py. A file of its
own, so that it runs beside the other pairing scenarios (tests/mesh/test_pairing.py) rather than
after them on the same worker.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import running, status
from tests.mesh.inbox import replies, send
from tests.mesh.pairing_corpus import CLAIMED_SOURCES, CONTACT, CORPUS_SIZE, OWNER, corpus
from tests.mesh.pairing_mesh import audit, memories, pair, pairing_config, transcript_rows, wait_answered

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _sentinel(text: str = "owner checks in") -> dict[str, Any]:
    return {"content": text, "meta": {"chat_id": "op", "message_id": f"sentinel-{text}", "user_id": OWNER}}


@pytest.mark.timeout(900)  # 10,000 events through the real servers: 330-400 s on 2 cores
async def test_ten_thousand_crafted_events_cause_no_turn_no_memory_write_and_no_bypass(
    tmp_path: Path,
) -> None:
    events = list(corpus())
    assert len(events) == CORPUS_SIZE
    kinds = Counter(kind for kind, _ in events)
    print(f"\ncrafted events by kind: {dict(sorted(kinds.items()))}")
    with FakeLLM(default=ModelReply("ok")) as llm:
        config = pairing_config(tmp_path, llm.openai_base_url)
        pair(config, "seed", "inbox", "default", CONTACT)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server inbox ready")
            await send(tmp_path, [event for _, event in events] + [_sentinel()])
            # The pump takes events in order: the owner's message last means every crafted one was decided.
            # Bounded by the test's timeout less the start-up: the drain alone is 5-6 minutes under load.
            await anyio.to_thread.run_sync(lambda: wait_answered(orch, 1, 780))
            refused = (await anyio.to_thread.run_sync(status, config))["refused"]
        prompts = [request.last_user_text or "" for request in llm.requests]
    by_reason = Counter[str]()
    for row in refused:
        by_reason[row["reason"]] += row["count"]
    print(f"refused by reason: {dict(sorted(by_reason.items()))}")
    # Every event without a sender id is refused and counted, whatever source or principal it claims.
    assert by_reason["no_sender"] == kinds["missing_id"] + kinds["sourceless_claim"]
    assert {r["source"] for r in refused if r["reason"] == "no_sender"} == {"-", *CLAIMED_SOURCES}
    assert len(prompts) == 1
    assert "owner checks in" in prompts[0]
    assert 'sender_role="owner"' in prompts[0]
    state = tmp_path / "state"
    assert {key for key, _ in transcript_rows(state)} == {"inbox|chat_id=op"}
    assert memories(state) == 0
    listed = pair(config, "list")
    assert [(r["sender"], r["role"]) for r in listed["records"]] == [(CONTACT, "contact")]
    assert len(listed["pending"]) <= 3
    assert all(p["sender"].startswith("u") and p["sender"] not in (OWNER, CONTACT) for p in listed["pending"])
    texts = [reply["text"] for reply in replies(tmp_path) if "text" in reply]
    codes = [text for text in texts if "nexo pair approve" in text]
    notices = [text for text in texts if text.startswith("[refused] inbox: ")]
    # One notice per refused source (per reason for senders), none for the gate's routine refusals.
    told = [r for r in refused if r["reason"] not in ("mention_required", "code_rate", "pending_full")]
    assert len(notices) == len(told)
    assert [t for t in texts if t not in notices] == [*codes, "ok"]
    assert len(codes) <= 3 * 2  # three pending senders at most, two replies each
    assert len(audit(config, "turn")) == 1
