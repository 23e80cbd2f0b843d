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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from orchestrator.mesh.fork_request import ForkRequest, interpreter_settings
from orchestrator.mesh.forked_process import ForkedProcess
from orchestrator.mesh.template import (
    EarlyChild,
    ForkedTemplate,
    Preforked,
    ask_for_children,
    end_early,
    fork_template,
)

logger = logging.getLogger("nexo.mesh")

TITLE_ROOM = 400
"""Spaces in the template's command line, overwritten by each child with its own command line."""
READY_TIMEOUT_S = 60.0
"""The template imports mcp and friends once; a loaded CI machine can take a while."""
REPLY_TIMEOUT_S = 10.0
EXIT_WAIT_S = 2.0
MAX_MESSAGE = 1 << 16


@dataclass(slots=True)
class _Early:
    """A server asked for before the event loop; ``process`` once the template's answer is read."""

    request: ForkRequest
    child: EarlyChild
    process: ForkedProcess | None = None


class ForkServer:
    """One template process per mesh, started at the first fork request."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._interpreter = interpreter_settings(env)
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
        self._early: list[_Early] = []
        """Asked for before the event loop and not adopted yet."""
        self._unanswered: list[_Early] = []
        """Of those, the ones whose answer is still in the socket, ahead of any later request's."""

    @property
    def pid(self) -> int | None:
        if self._preforked is not None:
            return self._preforked.process.pid
        return self._process.pid if self._process is not None else None

    def fork_template(self, shared: Sequence[str] = ()) -> bool:
        """Fork the template from this process now, before the event loop starts; whether it was.

        When it cannot be (the reason is logged), the template is spawned at the first fork request.
        """
        if self._preforked is not None or self._process is not None:
            return True
        made = fork_template(shared)
        if isinstance(made, str):
            self._not_forked = made  # logged when the template is spawned: logging is not set up yet
            return False
        self._preforked = made
        self._interpreter = made.interpreter
        return True

    def prestart(self, requests: list[ForkRequest], stderr: int) -> int:
        """Ask the forked template for these servers now, before the event loop starts, without
        waiting: it starts them once it has preloaded, while this process goes on with its own; each
        is adopted by the first :meth:`adopt` of an equal request. How many were asked for (none
        without a forked template)."""
        if self._preforked is None:
            return 0
        wanted = [r for r in requests if interpreter_settings(r.env).items() <= self._interpreter.items()]
        try:
            asked = ask_for_children(self._preforked, [r.message() for r in wanted], stderr)
        except OSError as exc:
            self._not_forked = f"it could not be asked before the event loop ({type(exc).__name__}: {exc})"
            self.close()  # nothing is asked of it yet: it is only ended
            return 0
        self._early = [_Early(request, child) for request, child in zip(wanted, asked, strict=True)]
        self._unanswered = list(self._early)
        return len(self._early)

    def close(self) -> None:
        """Outside the event loop (the state directory turned out to be in use, a Ctrl-C came while
        starting), or in a worker thread when the loop never used the template: end the forked
        template and whatever it started early, and wait for them, so that nothing outlives the
        command (:func:`~orchestrator.mesh.template.end_early`)."""
        children = [early.child for early in self._early]
        unanswered = len(self._unanswered)
        self._early = self._unanswered = []
        preforked, self._preforked = self._preforked, None
        end_early(preforked, children, unanswered, EXIT_WAIT_S)

    async def adopt(self, request: ForkRequest) -> tuple[ForkedProcess, int, int] | None:
        """The server :meth:`prestart` asked for with an equal request, with our ends of its stdin
        and stdout; None when there is none (any later start of the same server forks anew)."""
        if not self._early:
            return None
        async with self._lock:
            if self._control is None and self._unusable is None:
                await self._start()
            await self._read_early_answers(READY_TIMEOUT_S)
            for index, early in enumerate(self._early):
                if early.request == request and early.process is not None:
                    del self._early[index]
                    return early.process, early.child.stdin, early.child.stdout
        return None

    async def _read_early_answers(self, timeout: float) -> None:
        """The template's answers to what :meth:`prestart` asked, in the order asked: they come
        before any later request's. It answers once it has preloaded, so this may wait for that."""
        pending, self._unanswered = self._unanswered, []
        for early in pending:
            answer: object = "the template went away first"
            if self._replies is not None and self._unusable is None:
                try:
                    # Shielded: an answer left unread would be taken as the answer to a later request.
                    with anyio.CancelScope(shield=True), anyio.fail_after(timeout):
                        answer = await self._replies.receive()
                except (TimeoutError, anyio.EndOfStream) as exc:
                    self._give_up(
                        f"it did not answer the requests made before the event loop ({type(exc).__name__})"
                    )
            if isinstance(answer, ForkedProcess):
                early.process = answer
                continue
            if self._unusable is None:
                logger.warning("fork server: could not fork %s early: %s", early.request.module, answer)
            early.child.close()
            self._early.remove(early)
        if pending:
            started = [early.request.module for early in self._early if early.process is not None]
            logger.info(
                "fork server: started as asked before the event loop: %s", ", ".join(started) or "none"
            )

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
        if not interpreter_settings(request.env).items() <= self._interpreter.items():
            # PYTHON* variables act when an interpreter starts; a fork would silently ignore them.
            logger.info("fork server: %s sets PYTHON* variables of its own; spawning it", request.module)
            return None
        async with self._lock:
            if self._control is None and self._unusable is None:
                await self._start()
            await self._read_early_answers(READY_TIMEOUT_S)
            if self._control is None or self._replies is None or self._unusable is not None:
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
            return
        if self._not_forked is not None:
            logger.info("fork server: started as its own command: %s", self._not_forked)
        spawned = await self._spawn()
        if spawned is None:
            return
        self._process, ours = spawned
        await self._handshake(ours)

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
            except ConnectionResetError:
                # The template exited with requests of ours unread: the kernel says so first, once,
                # then still hands over what it sent before (a "failed" among them), then end of file.
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
            if "failed" in message and self._control is not None:
                self._give_up(str(message["failed"]))  # a forked template could not preload; it exits
            elif "exited" in message:
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
        server: end of input first, SIGKILL to its process group if it is still there after that.

        When nothing in the event loop has asked the template yet, its answers are all still in the
        socket and this process's task group may already be cancelled (a Ctrl-C while starting),
        with no task left to read them: :meth:`close` reads them itself, in a worker thread. Any
        request or adoption in the loop reads every early answer first, so none is left unread."""
        if self._unanswered:
            await anyio.to_thread.run_sync(self.close)
        early, self._early = self._early, []
        for each in early:
            each.child.close()
        for each in early:
            process = each.process
            if process is None:
                continue
            self._children.pop(process.pid, None)
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


async def _send(control: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    await anyio.wait_writable(control)
    socket.send_fds(control, [json.dumps(message).encode()], fds)
