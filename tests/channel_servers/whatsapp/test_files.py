"""Files out: a workspace file is uploaded to WhatsApp, then sent by its media id."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channel_servers.whatsapp.conftest import CONTACT, running

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


async def test_a_workspace_image_is_uploaded_then_sent_by_media_id_with_its_caption(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "chart.png").write_bytes(PNG)
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        result = await wa.client.call_tool(
            "send_file", {"chat_id": CONTACT, "path": "chart.png", "caption": "The **chart**"}
        )
    assert result.structured_content is not None
    assert result.structured_content["status"] == "sent"
    ((media_id, mime, content),) = wa.fake.uploads
    assert (mime, content) == ("image/png", PNG)
    assert [(m["type"], m["image"]) for m in wa.fake.messages()] == [
        ("image", {"id": media_id, "caption": "The *chart*"})
    ]


async def test_a_document_keeps_its_file_name(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "report.pdf").write_bytes(b"%PDF-1.7 tiny")
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        await wa.client.call_tool("send_file", {"chat_id": CONTACT, "path": "report.pdf"})
    ((media_id, mime, _),) = wa.fake.uploads
    assert mime == "application/pdf"
    assert [m["document"] for m in wa.fake.messages()] == [{"id": media_id, "filename": "report.pdf"}]


async def test_a_file_outside_the_window_is_refused_naming_the_window(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "chart.png").write_bytes(PNG)
    async with running(tmp_path, notice_template="nexo_notice") as wa:
        result = await wa.client.call_tool("send_file", {"chat_id": CONTACT, "path": "chart.png"})
    assert result.is_error
    assert "outside the customer-service window" in " ".join(getattr(b, "text", "") for b in result.content)
    assert wa.fake.uploads == []
