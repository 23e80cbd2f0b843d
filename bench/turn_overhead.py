"""Turn overhead as a person feels it: from a message entering the console channel server to the reply
leaving it, through the real default mesh (``nexo run`` with every server of orchestrator/defaults.yaml),
minus the model's time.

The bench is the console's client: it writes a ``say`` frame to the console server's Unix socket and
times until the ``reply`` frame to it arrives, so the figure holds the channel server's inbox, the
orchestrator's pull, pairing gate, session, memory recall, the loop, the audit ledger and the reply's
way back out. The scripted model answers at once; its own time, the round trip of one of its
answers measured from the bench with no HTTP library in between (the request's bytes on a kept
connection, the answer read by its length), is the baseline and is subtracted from each sample (one
model call per turn): the orchestrator's own HTTP client counts as nexo's overhead.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import anyio
import httpx2
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.mesh_run import MeshNotReady, default_mesh, scripted_model, workdir
from bench.stats import Result, percentile
from bench.support import collector_frozen, describe, progress
from orchestrator.sockets import console_path
from shared import unix_socket
from shared.protocol.console_wire import MAX_FRAME_BYTES, Hello, Reply, Say, decode_server, encode
from shared.unix_socket import UnixStream
from tests.fakes.llm import FakeLLM

TARGET_MS = 15.0
WARMUP_TURNS = 3
REPLY_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 20.0


class Console:
    """The operator's side of the console socket, speaking its frames."""

    def __init__(self, stream: UnixStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)

    async def turn(self, text: str) -> float:
        """Seconds from writing a message to reading the reply to it."""
        message_id = uuid.uuid4().hex
        start = time.perf_counter()
        await self.stream.send(encode(Say(id=message_id, text=text)))
        with anyio.fail_after(REPLY_TIMEOUT_S):
            while True:
                frame = decode_server(await self.reader.receive_until(b"\n", MAX_FRAME_BYTES))
                if isinstance(frame, Reply) and frame.reply_to == message_id:
                    elapsed = time.perf_counter() - start
                    if frame.notice:
                        raise RuntimeError(f"the turn ended with a notice, not an answer: {frame.text}")
                    return elapsed


async def _turns(path: Path, n: int) -> list[float]:
    with anyio.fail_after(CONNECT_TIMEOUT_S):
        stream = await unix_socket.connect(path)
    async with stream:
        console = Console(stream)
        await stream.send(encode(Hello(chat_id="bench")))
        for i in range(WARMUP_TURNS):
            await console.turn(f"warm up {i}")
        # This process is the console's client and the scripted model: its own collections are
        # not the turn's (bench.support.collector_frozen).
        with collector_frozen():
            return [await console.turn(f"what time is it? ({i})") for i in range(n)]


def _model_round_trips(fake: FakeLLM, n: int) -> list[float]:
    """Seconds of one answer of the scripted model: the same request bytes written on a kept
    connection and its answer read by its length, with no HTTP library in between, so the baseline is
    the model server's own time and the loopback's. The orchestrator's HTTP client is nexo's work and
    stays in the turn's overhead."""
    url = httpx2.URL(f"{fake.openai_base_url}/chat/completions")
    body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (
        f"POST {url.raw_path.decode()} HTTP/1.1\r\nhost: {url.host}:{url.port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    request = head.encode() + body
    samples = []
    with (
        collector_frozen(),
        socket.create_connection((url.host, url.port or 80), timeout=REPLY_TIMEOUT_S) as conn,
    ):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = conn.makefile("rb")
        for _ in range(n + WARMUP_TURNS):
            start = time.perf_counter()
            conn.sendall(request)
            status = reader.readline()
            length = None
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if not status.startswith(b"HTTP/1.1 200") or length is None:
                raise RuntimeError(f"the scripted model answered {status.strip()!r} without a length")
            reader.read(length)
            samples.append(time.perf_counter() - start)
    return samples[WARMUP_TURNS:]


def measure(quick: bool) -> list[Result]:
    n = 20 if quick else 100
    result = Result(
        "turn overhead, channel in to channel out",
        "ms",
        "the scripted model's own round trip",
        target=TARGET_MS,
    )
    with scripted_model() as fake, workdir() as tmp:
        progress(f"turn overhead: {n} console turns through the default mesh")
        try:
            with default_mesh(fake, tmp, "turns") as started:
                turns = anyio.run(_turns, console_path(started.state_dir), n)
            model = _model_round_trips(fake, n)
        except (MeshNotReady, OSError, TimeoutError, RuntimeError, httpx2.HTTPError) as exc:
            result.errors.append(describe(exc))
            return [result]
    model_s = percentile(model, 0.5)
    result.baseline = [m * 1000 for m in model]
    result.samples = [(t - model_s) * 1000 for t in turns]
    return [result]
