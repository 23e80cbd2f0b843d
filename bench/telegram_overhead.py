"""Turn overhead through the Telegram channel, side by side with the console in the same mesh.

One ``nexo run`` holds the default mesh plus the Telegram channel server, whose Bot API is the
stand-in (``tests/fakes/telegram_api.py``) served from a thread of the bench. A Telegram turn is
timed from the update being offered to a long poll to the answer's ``sendMessage`` arriving at the
stand-in; a console turn from the ``say`` frame to its ``reply`` frame, as ``turn_overhead`` does,
in alternating halves.
The scripted model answers at once; its own round trip is subtracted from both. Target: the
Telegram turn within 1.5x of the console's.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal

from bench.mesh_run import DEFAULT_SERVERS, MeshNotReady, scripted_model, workdir
from bench.stats import Result, percentile
from bench.support import describe, progress
from bench.turn_overhead import _model_round_trips, _turns
from orchestrator.cli.chat import console_socket
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.mesh.harness import python_server, running, write_config

RELATIVE_TARGET = 1.5
WARMUP_TURNS = 3
USER = 5559001
REPLY_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 120.0


def _config(fake: FakeLLM, api_url: str, tmp: Path) -> Path:
    servers = {name: python_server(module) for name, module in DEFAULT_SERVERS.items()}
    servers["telegram"] = python_server(
        "channel_servers.telegram",
        env={"NEXO_TELEGRAM_BOT_TOKEN": TOKEN, "NEXO_TELEGRAM_API_BASE_URL": api_url},
    )
    return write_config(
        tmp / "telegram.yaml",
        state_dir=tmp / "state-telegram",
        llm_base_url=fake.openai_base_url,
        servers=servers,
        agent={"channels": ["console", "telegram"]},
        extra={
            "channel_options": {
                "console": {"rate_per_minute": None},
                "telegram": {
                    "rate_per_minute": None,
                    "pairing": {"platform": "telegram", "allow_from": [str(USER)]},
                },
            }
        },
    )


async def _telegram_turn(telegram: FakeTelegram, text: str) -> float:
    """Seconds from offering an update to the answer reaching the Bot API."""
    answered = len(telegram.sent_to(USER))
    start = time.perf_counter()
    telegram.inject(telegram.message(USER, text))
    with anyio.fail_after(REPLY_TIMEOUT_S):
        while len(telegram.sent_to(USER)) <= answered:
            await telegram.sent_count(len(telegram.sent) + 1, timeout=REPLY_TIMEOUT_S)
    return time.perf_counter() - start


def _telegram_turns(portal: BlockingPortal, telegram: FakeTelegram, n: int) -> list[float]:
    for i in range(WARMUP_TURNS):
        portal.call(_telegram_turn, telegram, f"warm up {i}")
    return [portal.call(_telegram_turn, telegram, f"what time is it? ({i})") for i in range(n)]


def measure(quick: bool) -> list[Result]:
    n = 20 if quick else 100
    result = Result(
        "turn overhead through Telegram (stand-in Bot API)",
        "ms",
        "console turn overhead, same mesh",
        relative_target=(RELATIVE_TARGET, 0.0),
    )
    telegram = FakeTelegram()
    with scripted_model() as fake, workdir() as tmp, start_blocking_portal() as portal:
        progress(f"telegram overhead: {n} Telegram and {n} console turns through one mesh")
        try:
            with portal.wrap_async_context_manager(telegram.serve()) as api_url:
                config = _config(fake, api_url, tmp)
                with running(config, timeout=READY_TIMEOUT_S) as orch:
                    orch.wait_for_line("server telegram ready", timeout=READY_TIMEOUT_S)
                    # Alternating halves, so a machine that speeds up or slows down during the
                    # run weighs on both channels alike.
                    telegram_turns: list[float] = []
                    console_turns: list[float] = []
                    for _ in range(2):
                        telegram_turns += _telegram_turns(portal, telegram, n // 2)
                        console_turns += anyio.run(_turns, console_socket(tmp / "state-telegram"), n // 2)
            model = _model_round_trips(fake, n)
        except (AssertionError, MeshNotReady, OSError, TimeoutError, RuntimeError, httpx2.HTTPError) as exc:
            result.errors.append(describe(exc))
            return [result]
    model_s = percentile(model, 0.5)
    result.samples = [(t - model_s) * 1000 for t in telegram_turns]
    result.baseline = [(t - model_s) * 1000 for t in console_turns]
    return [result]
