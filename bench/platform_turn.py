"""Turn overhead through a chat platform's channel server, side by side with the console in one run.

One ``nexo run`` holds the default mesh (every server of orchestrator/defaults.yaml) plus the
platform's channel server, whose API is a local stand-in (``tests/fakes``). A platform turn is timed
from handing the channel the platform's message (a signed webhook) to the stand-in receiving the
reply; a console turn from the ``say`` frame to the ``reply`` frame. The scripted model answers at
once and both kinds of turn wait on it once, so the ratio of the medians is the platform's own
overhead.

A platform plugs in as a :class:`Platform`: its server entry, its channel options, and how to time
one turn against its stand-in (see :func:`whatsapp` and :func:`telegram`). Each platform gets a
mesh of its own and one row, with its console baseline from that same mesh.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2

from bench.mesh_run import READY_TIMEOUT_S, MeshNotReady, default_servers, scripted_model, workdir
from bench.stats import Result
from bench.support import describe, progress
from bench.turn_overhead import Console
from orchestrator.sockets import console_path
from shared import unix_socket
from shared.protocol.console_wire import Hello, encode
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import TOKEN as TELEGRAM_TOKEN
from tests.fakes.telegram_api import FakeTelegram
from tests.fakes.whatsapp_api import APP_SECRET, PHONE_NUMBER_ID, TOKEN, FakeWhatsApp, serve
from tests.mesh.harness import free_port, python_server, running, write_config

UNLIMITED = {"rate_per_minute": None}
"""Channel options that lift the inbound rate limit, so a hundred quick turns are all answered."""
RELATIVE_TARGET = 1.5
WARMUP_TURNS = 3
REPLY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Platform:
    name: str
    """The channel server's name in the config."""
    server: dict[str, Any]
    channel_options: dict[str, Any]
    turn: Callable[[str], Awaitable[float]]
    """Seconds from the platform handing over a message to its stand-in receiving the reply."""


PlatformFactory = Callable[[httpx2.AsyncClient], AbstractAsyncContextManager[Platform]]


@asynccontextmanager
async def whatsapp(http: httpx2.AsyncClient) -> AsyncIterator[Platform]:
    fake = FakeWhatsApp()
    contact = "15550009999"
    port = free_port()
    webhook = f"http://127.0.0.1:{port}/webhook"
    count = 0

    async def turn(text: str) -> float:
        nonlocal count
        count += 1
        message_id = f"wamid.bench{count:06d}"
        payload = fake.text(contact, text, message_id=message_id)
        start = time.perf_counter()
        await fake.deliver(http, webhook, payload)

        def replied(found: FakeWhatsApp) -> bool:
            return any(m.get("context", {}).get("message_id") == message_id for m in found.messages())

        await fake.wait_for(replied, REPLY_TIMEOUT_S)
        return time.perf_counter() - start

    async with serve(fake):
        yield Platform(
            name="whatsapp",
            server=python_server(
                "channel_servers.whatsapp",
                env={
                    "NEXO_WHATSAPP_ACCESS_TOKEN": TOKEN,
                    "NEXO_WHATSAPP_APP_SECRET": APP_SECRET,
                    "NEXO_WHATSAPP_VERIFY_TOKEN": "bench-verify",
                    "NEXO_WHATSAPP_PHONE_NUMBER_ID": PHONE_NUMBER_ID,
                    "NEXO_WHATSAPP_API_BASE_URL": fake.url,
                    "NEXO_WHATSAPP_PORT": str(port),
                },
            ),
            channel_options={**UNLIMITED, "pairing": {"allow_from": [contact]}},
            turn=turn,
        )


@asynccontextmanager
async def telegram(_: httpx2.AsyncClient) -> AsyncIterator[Platform]:
    fake = FakeTelegram()
    user = 5559001

    async def turn(text: str) -> float:
        answered = len(fake.sent_to(user))
        start = time.perf_counter()
        fake.inject(fake.message(user, text))  # handed over at the channel's next long poll
        with anyio.fail_after(REPLY_TIMEOUT_S):
            while len(fake.sent_to(user)) <= answered:
                await fake.sent_count(len(fake.sent) + 1, timeout=REPLY_TIMEOUT_S)
        return time.perf_counter() - start

    async with fake.serve() as api_url:
        yield Platform(
            name="telegram",
            server=python_server(
                "channel_servers.telegram",
                env={"NEXO_TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "NEXO_TELEGRAM_API_BASE_URL": api_url},
            ),
            channel_options={**UNLIMITED, "pairing": {"platform": "telegram", "allow_from": [str(user)]}},
            turn=turn,
        )


PLATFORMS: dict[str, PlatformFactory] = {"whatsapp": whatsapp, "telegram": telegram}


async def _run(
    factory: PlatformFactory, model: FakeLLM, tmp: Path, n: int
) -> tuple[list[float], list[float]]:
    async with httpx2.AsyncClient() as http, factory(http) as platform:
        servers = {name: python_server(module) for name, module in default_servers().items()}
        state = tmp / f"state-{platform.name}"
        config = write_config(
            tmp / f"{platform.name}.yaml",
            state_dir=state,
            llm_base_url=model.openai_base_url,
            servers={**servers, platform.name: platform.server},
            agent={"channels": ["console", platform.name]},
            extra={"channel_options": {"console": UNLIMITED, platform.name: platform.channel_options}},
        )
        mesh = running(config, timeout=READY_TIMEOUT_S * 2)
        try:
            orch = await anyio.to_thread.run_sync(mesh.__enter__)
        except AssertionError as exc:
            raise MeshNotReady(f"no ready line: {str(exc).splitlines()[-1]}") from exc
        try:
            await anyio.to_thread.run_sync(
                partial(orch.wait_for_line, f"server {platform.name} ready", READY_TIMEOUT_S)
            )
            stream = await unix_socket.connect(console_path(state))
            async with stream:
                console = Console(stream)
                await stream.send(encode(Hello(chat_id="bench")))
                for i in range(WARMUP_TURNS):
                    await console.turn(f"warm up {i}")
                    await platform.turn(f"warm up {i}")
                console_s, platform_s = [], []
                for i in range(n):  # interleaved, so both see the same machine load
                    console_s.append(await console.turn(f"what time is it? ({i})"))
                    platform_s.append(await platform.turn(f"what time is it? ({i})"))
        finally:
            await anyio.to_thread.run_sync(partial(mesh.__exit__, None, None, None))
    return console_s, platform_s


def measure(quick: bool) -> list[Result]:
    n = 20 if quick else 100
    results = []
    for name, factory in PLATFORMS.items():
        result = Result(
            f"turn overhead through {name}",
            "ms",
            "a console turn in the same mesh",
            relative_target=(RELATIVE_TARGET, 0.0),
        )
        progress(f"{name} turns: {n} through {name} and {n} through the console, interleaved")
        with scripted_model() as model, workdir() as tmp:
            try:
                console_s, platform_s = anyio.run(_run, factory, model, tmp, n)
            except (MeshNotReady, OSError, TimeoutError, RuntimeError, httpx2.HTTPError) as exc:
                result.errors.append(describe(exc))
                results.append(result)
                continue
        result.baseline = [s * 1000 for s in console_s]
        result.samples = [s * 1000 for s in platform_s]
        results.append(result)
    return results
