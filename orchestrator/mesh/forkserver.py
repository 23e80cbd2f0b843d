"""The orchestrator's side of the fork server (``shared/forkserver.py``): start it, ask it for children.

Built-in stdio servers (``python -m servers.X`` with this very interpreter) are forked from one
template process that has already imported what they share, so their modules' pages are shared
and a restart skips the imports. The template is forked from this process when
:meth:`ForkServer.fork_template` was called before the event loop started (see
``orchestrator/mesh/template.py``), else spawned at the first fork request. A forked template
may be asked for the built-in servers before the event loop too (:meth:`ForkServer.prestart`);
their connections adopt those processes on their first start. Any other command is
spawned as before. When the template cannot start or goes away, every later start is a plain spawn
and the log says so once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from orchestrator.mesh.config import StdioServerConfig
from orchestrator.mesh.forked_process import ForkedProcess
from orchestrator.mesh.template import EarlyChild, ForkedTemplate, Preforked, fork_children, fork_template

logger = logging.getLogger("nexo.mesh")

BUILT_IN_PACKAGES = ("servers", "channel_servers")
TITLE_ROOM = 400
"""Spaces in the template's command line, overwritten by each child with its own command line."""
READY_TIMEOUT_S = 60.0
"""The template imports mcp and friends once; a loaded CI machine can take a while."""
REPLY_TIMEOUT_S = 10.0
EXIT_WAIT_S = 2.0
MAX_MESSAGE = 1 << 16


def built_in_module(config: StdioServerConfig) -> str | None:
    """The module of ``python -m servers.X`` run by this interpreter; None for any other command."""
    # absolute(), not resolve(): a virtualenv's python is a symlink to an interpreter without its packages.
    if Path(config.command).absolute() != Path(sys.executable).absolute():
        return None
    if len(config.args) < 2 or config.args[0] != "-m":
        return None
    module = config.args[1]
    return module if module.partition(".")[0] in BUILT_IN_PACKAGES else None


@dataclass(frozen=True, slots=True)
class ForkRequest:
    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str

    def message(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "args": self.args,
            "env": self.env,
            "cwd": self.cwd,
            "title": [sys.executable, "-m", self.module, *self.args],
        }


class ForkServer:
    """One template process per mesh, started at the first fork request."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._interpreter = _interpreter_settings(env)
        """The ``PYTHON*`` variables the template's interpreter runs with."""
        self._lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._preforked: Preforked | None = None
        self._not_forked: str | None = None
        self._process: Process | ForkedTemplate | None = None
        self._control: socket.socket | None = None
        self._replies: MemoryObjectReceiveStream[dict[str, Any] | ForkedProcess] | None = None
        self._children: dict[int, ForkedProcess] = {}
        self._unusable: str | None = None
        self._early: list[tuple[ForkRequest, EarlyChild]] = []
        self._early_exits: dict[int, int] = {}
        self._early_errors: list[str] = []
        self._adoptable: dict[int, ForkedProcess] = {}

    @property
    def pid(self) -> int | None:
        if self._preforked is not None:
            return self._preforked.process.pid
        return self._process.pid if self._process is not None else None

    def fork_template(self) -> bool:
        """Fork the template from this process now, before the event loop starts; whether it was.

        When it cannot be (the reason is logged), the template is spawned at the first fork request.
        """
        if self._preforked is not None or self._process is not None:
            return True
        made = fork_template()
        if isinstance(made, str):
            self._not_forked = made  # logged when the template is spawned: logging is not set up yet
            return False
        self._preforked = made
        self._interpreter = made.interpreter
        return True

    def prestart(self, requests: list[ForkRequest], stderr: int) -> int:
        """Have the forked template start these servers now, before the event loop starts, so they
        start while this process goes on with its own; each is adopted by the first :meth:`adopt`
        of an equal request. How many were started (none without a forked template)."""
        if self._preforked is None:
            return 0
        wanted = [r for r in requests if _interpreter_settings(r.env).items() <= self._interpreter.items()]
        try:
            early = fork_children(self._preforked, [r.message() for r in wanted], stderr)
        except (OSError, ValueError) as exc:
            self._not_forked = f"it did not answer before the event loop ({type(exc).__name__}: {exc})"
            self._abandon_preforked()
            return 0
        self._early = [(r, c) for r, c in zip(wanted, early.started, strict=True) if c is not None]
        self._early_exits = early.exited
        self._early_errors = early.errors
        return len(self._early)

    def close(self) -> None:
        """Before any event loop ran (say, the state directory turned out to be in use): end the
        forked template and whatever it started early."""
        for _, child in self._early:
            child.close()
        self._early = []
        self._abandon_preforked()

    def _abandon_preforked(self) -> None:
        if self._preforked is not None:
            self._preforked.control.close()
            self._preforked.process.kill()
            self._preforked.process.reap()
            self._preforked = None

    async def adopt(self, request: ForkRequest) -> tuple[ForkedProcess, int, int] | None:
        """The server :meth:`prestart` started for an equal request, with our ends of its stdin
        and stdout; None when there is none (any later start of the same server forks anew)."""
        if not self._early:
            return None
        async with self._lock:
            if self._control is None and self._unusable is None:
                await self._start()
            for index, (made_for, child) in enumerate(self._early):
                if made_for == request:
                    del self._early[index]
                    return self._adoptable.pop(child.pid), child.stdin, child.stdout
        return None

    async def __aenter__(self) -> ForkServer:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            await self._stop_template()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def fork(self, request: ForkRequest, fds: tuple[int, int, int]) -> ForkedProcess | None:
        """A child running ``request`` on ``fds`` (stdin, stdout, stderr), or None: spawn it instead."""
        if not _interpreter_settings(request.env).items() <= self._interpreter.items():
            # PYTHON* variables act when an interpreter starts; a fork would silently ignore them.
            logger.info("fork server: %s sets PYTHON* variables of its own; spawning it", request.module)
            return None
        async with self._lock:
            if self._control is None and self._unusable is None:
                await self._start()
            if self._control is None or self._replies is None:
                return None
            try:
                # Shielded: a reply left unread would be taken as the answer to the next request.
                with anyio.CancelScope(shield=True), anyio.fail_after(REPLY_TIMEOUT_S):
                    await _send(self._control, request.message(), list(fds))
                    reply = await self._replies.receive()
            except (OSError, TimeoutError, anyio.EndOfStream) as exc:
                self._give_up(f"it did not answer a fork request ({type(exc).__name__})")
                return None
            if isinstance(reply, ForkedProcess):
                return reply
            logger.warning("fork server: could not fork %s: %s; spawning it", request.module, reply)
            return None

    async def _start(self) -> None:
        if self._preforked is not None:
            self._process, ours = self._preforked.process, self._preforked.control
            self._preforked = None
            replies = self._listen(ours)
            self._control, self._replies = ours, replies
            logger.info("fork server %s ready (forked)", self._process.pid, extra={"server": "fork-server"})
            self._take_early()
            return
        if self._not_forked is not None:
            logger.info("fork server: started as its own command: %s", self._not_forked)
        spawned = await self._spawn()
        if spawned is None:
            return
        self._process, ours = spawned
        await self._handshake(ours)

    def _take_early(self) -> None:
        """Watch the children :meth:`prestart` made as any other (their exits come on the socket)."""
        for error in self._early_errors:
            logger.warning("fork server: could not fork a server early: %s", error)
        for _, early in self._early:
            child = ForkedProcess(early.pid, early.pidfd)
            self._children[child.pid] = self._adoptable[child.pid] = child
            if child.pid in self._early_exits:
                child.returncode = self._early_exits.pop(child.pid)
                child.reported.set()
        if self._early:
            names = ", ".join(request.module for request, _ in self._early)
            logger.info("fork server: started before the event loop: %s", names)

    async def _spawn(self) -> tuple[Process, socket.socket] | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await anyio.open_process(
                [sys.executable, "-m", "shared.forkserver", str(theirs.fileno()), " " * TITLE_ROOM],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None,
                env=self._env,
                start_new_session=True,
                pass_fds=[theirs.fileno()],
            )
        except OSError as exc:
            ours.close()
            self._give_up(f"it could not start ({exc})")
            return None
        finally:
            theirs.close()
        ours.setblocking(False)
        return process, ours

    def _listen(self, ours: socket.socket) -> MemoryObjectReceiveStream[dict[str, Any] | ForkedProcess]:
        send, receive = anyio.create_memory_object_stream[dict[str, Any] | ForkedProcess](math.inf)
        assert self._tg is not None
        self._tg.start_soon(self._read, ours, send)
        return receive

    async def _handshake(self, ours: socket.socket) -> None:
        assert self._process is not None
        receive = self._listen(ours)
        first: object = {"failed": f"no ready message within {READY_TIMEOUT_S:g}s"}
        try:
            with anyio.move_on_after(READY_TIMEOUT_S):
                first = await receive.receive()
        except anyio.EndOfStream:
            first = {"failed": "it exited"}
        finally:
            ready = isinstance(first, dict) and "ready" in first
            if not ready:
                anyio.notify_closing(ours)
                ours.close()
                receive.close()
                if self._process.returncode is None:
                    self._process.kill()
        if not ready:
            reason = first.get("failed", first) if isinstance(first, dict) else first
            self._give_up(f"it did not start: {reason}")
            return
        self._control, self._replies = ours, receive
        logger.info("fork server %s ready", self._process.pid, extra={"server": "fork-server"})

    async def _read(self, control: socket.socket, replies: MemoryObjectSendStream[Any]) -> None:
        with control:
            async with replies:
                await self._dispatch(control, replies)

    async def _dispatch(self, control: socket.socket, replies: MemoryObjectSendStream[Any]) -> None:
        while True:
            try:
                await anyio.wait_readable(control)
                data, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE, 1)
            except BlockingIOError:
                continue
            except (OSError, anyio.ClosedResourceError):
                data, fds = b"", []
            if not data:
                if self._control is not None:
                    self._control = None
                    self._give_up("it exited")
                    await self._reap_template()
                return
            message = json.loads(data)
            if "exited" in message:
                child = self._children.pop(message["exited"], None)
                if child is not None:
                    child.returncode = message["returncode"]
                    child.reported.set()
            elif "forked" in message and fds:
                os.set_inheritable(fds[0], False)
                child = ForkedProcess(message["forked"], fds[0])
                self._children[child.pid] = child
                await replies.send(child)
            else:
                for fd in fds:
                    os.close(fd)
                await replies.send(message.get("error", message))

    def _give_up(self, why: str) -> None:
        if self._unusable is None:
            self._unusable = why
            logger.warning(
                "fork server: %s; built-in servers are started as their own commands from now on",
                why,
                extra={"server": "fork-server"},
            )

    async def _reap_template(self) -> None:
        if self._process is not None:
            with anyio.move_on_after(EXIT_WAIT_S):
                await self._process.wait()

    async def _end_unadopted(self) -> None:
        """End the servers started early that no connection adopted, as a connection ends its
        server: end of input first, SIGKILL to its process group if it is still there after that."""
        early, self._early = self._early, []
        for _, child in early:
            os.close(child.stdin)
            os.close(child.stdout)
        for _, child in early:
            self._children.pop(child.pid, None)
            process = self._adoptable.pop(child.pid, None) or ForkedProcess(child.pid, child.pidfd)
            if not await process.wait(EXIT_WAIT_S):
                process.kill_group(signal.SIGKILL)
                await process.wait(EXIT_WAIT_S)
            process.close()

    async def _stop_template(self) -> None:
        await self._end_unadopted()  # while the template is there to reap them
        if self._preforked is not None:
            # Forked but never asked for a child: its end of file is our socket closing.
            self._process = self._preforked.process
            self._preforked.control.close()
            self._preforked = None
        if self._replies is not None:
            self._replies.close()
        control, self._control = self._control, None
        if control is not None:
            anyio.notify_closing(control)
            control.close()
        process = self._process
        if process is None:
            return
        with anyio.move_on_after(EXIT_WAIT_S):
            await process.wait()
            return
        process.kill()
        with anyio.move_on_after(EXIT_WAIT_S):
            await process.wait()


def _interpreter_settings(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key.startswith("PYTHON")}


async def _send(control: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    await anyio.wait_writable(control)
    socket.send_fds(control, [json.dumps(message).encode()], fds)
