"""Full disks across the mesh: each writing server reports its files (``nexo/storage/status``), and the
orchestrator shows a full one in ``nexo status`` and ``nexo setup doctor`` and tells the operator once
per condition (not once per refused message).

A server whose disk is full stays up and refuses each write with a sentence naming the file; this
module only watches and tells. The condition ends by itself once the disk has room again.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp import MCPError

from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink
from orchestrator.intake.outbound import notify
from orchestrator.mesh import Mesh, ServerConnection, ServerUnavailable
from orchestrator.storage_report import FullFile
from shared.protocol.audit.bodies import NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.storage import StorageStatusParams, StorageStatusRequest, StorageStatusResult

logger = logging.getLogger("nexo.storage")

ASK_TIMEOUT_S = 10.0
NOTICE_TIMEOUT_S = 30.0


async def ask_storage(connection: ServerConnection) -> StorageStatusResult | None:
    """The server's storage report; None when it does not serve one (not a nexo server) or is down."""
    try:
        return await connection.request(
            StorageStatusRequest(params=StorageStatusParams()), StorageStatusResult, timeout=ASK_TIMEOUT_S
        )
    except (MCPError, ServerUnavailable):
        return None


class StorageWatch:
    """Asks every ready server for its storage condition; tells the operator once per new one."""

    def __init__(self, config: NexoConfig, mesh: Mesh, sink: AuditSink) -> None:
        self._config = config
        self._mesh = mesh
        self._sink = sink
        self._full: dict[tuple[str, str], FullFile] = {}
        self._told: set[tuple[str, str, str | None]] = set()

    @property
    def full(self) -> list[FullFile]:
        return list(self._full.values())

    def status(self) -> list[dict[str, Any]]:
        return [file.as_dict() for file in self._full.values()]

    def warnings(self) -> list[str]:
        return [file.sentence() for file in self._full.values()]

    async def run(self, interval_s: float) -> None:
        while True:
            await self.check()
            await anyio.sleep(interval_s)

    async def check(self) -> None:
        for name, connection in self._mesh.connections.items():
            if connection.state != "ready":
                continue
            report = await ask_storage(connection)
            if report is None:
                continue
            for stored in report.files:
                key = (name, stored.path)
                if stored.full:
                    self._full[key] = FullFile(name, stored.path, stored.since)
                elif self._full.pop(key, None) is not None:
                    logger.warning("server %s: the disk holding %s has space again", name, stored.path)
        for file in self.full:
            told = (file.server, file.path, file.since)
            if told not in self._told:
                self._told.add(told)
                await self._tell(file)

    async def _tell(self, file: FullFile) -> None:
        sentence = file.sentence()
        logger.error("%s", sentence, extra={"server": file.server})
        body = NoticeBody(level="error", message=sentence[:4000], limit="disk_space")
        self._sink.record(
            EntryDraft.of(body, source="orchestrator", subject=f"disk full {file.server}"[:500])
        )
        operator = self._config.operator
        try:
            with anyio.fail_after(NOTICE_TIMEOUT_S):
                await notify(
                    self._mesh,
                    self._config,
                    operator.channel,
                    operator.chat_id,
                    f"[disk full] {sentence}. `nexo status` shows it until space is freed.",
                    key=f"disk-full:{file.server}:{file.path}:{file.since}",
                    sink=self._sink,
                )
        except Exception as exc:  # noqa: BLE001 -- the log and `nexo status` still say it
            logger.warning("could not tell the operator (%s): %s", operator.channel, exc)
