"""One received mail as the channel sees it: who wrote, which thread, its text, and whether to answer."""

from __future__ import annotations

import email.policy
import hashlib
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses
from html.parser import HTMLParser

_MESSAGE_ID = re.compile(r"<([^<>\s]+)>")
_BULK = {"bulk", "junk", "list", "auto_reply"}
_BLOCKS = {
    "p",
    "div",
    "br",
    "ul",
    "ol",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "pre",
    "table",
}
_HIDDEN = {"script", "style", "head", "title"}


@dataclass(frozen=True, slots=True)
class Mail:
    message: EmailMessage
    message_id: str
    """Without angle brackets; a hash of the mail when it has none."""
    references: tuple[str, ...]
    """The thread's earlier Message-IDs, oldest first (References, else In-Reply-To)."""
    sender: str
    """The From address, lower case; empty when From is not exactly one address."""
    sender_name: str
    subject: str

    @property
    def thread(self) -> str:
        """The thread's first message: every mail of one conversation has the same one."""
        return self.references[0] if self.references else self.message_id


def message_ids(value: str | None) -> list[str]:
    return _MESSAGE_ID.findall(value or "")


def parse(raw: bytes) -> Mail:
    message = BytesParser(policy=email.policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    own = message_ids(str(message.get("Message-ID", "")))
    references = message_ids(str(message.get("References", ""))) or message_ids(
        str(message.get("In-Reply-To", ""))
    )
    senders = [(name, address) for name, address in getaddresses(message.get_all("From", [])) if address]
    name, address = senders[0] if len(senders) == 1 else ("", "")
    return Mail(
        message=message,
        message_id=own[0] if own else f"sha256-{hashlib.sha256(raw).hexdigest()}@nexo.invalid",
        references=tuple(references),
        sender=address.lower(),
        sender_name=name,
        subject=" ".join(str(message.get("Subject", "")).split()),
    )


def not_for_an_answer(mail: Mail, own_address: str) -> str | None:
    """Why this mail must never be answered (RFC 3834): auto-replies, bounces, lists, our own mail."""
    headers = mail.message
    auto = str(headers.get("Auto-Submitted", "no")).split(";")[0].strip().lower()
    if auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = str(headers.get("Precedence", "")).strip().lower()
    if precedence in _BULK:
        return f"Precedence: {precedence}"
    for list_header in ("List-Id", "List-Unsubscribe", "List-Post"):
        if list_header in headers:
            return f"mailing list ({list_header})"
    return_path = headers.get("Return-Path")
    if return_path is not None and str(return_path).strip() in ("<>", ""):
        return "a bounce (empty Return-Path)"
    if headers.get_content_type() == "multipart/report":
        return "a delivery or read report"
    if "X-Autoreply" in headers or "X-Autorespond" in headers:
        return "an auto-reply"
    if not mail.sender:
        return "no single From address"
    if mail.sender == own_address or mail.sender.startswith(("mailer-daemon@", "postmaster@")):
        return f"from {mail.sender}"
    return None


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0
        self._href: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("\n- ")
        if tag == "a":
            self._href.append(dict(attrs).get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")
        if tag == "a" and self._href:
            href = self._href.pop()
            if href and href.startswith(("http://", "https://", "mailto:")):
                self.parts.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = [line.strip() for line in "".join(parser.parts).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def body_text(mail: Mail) -> str:
    """The mail's text: the plain part, else the HTML part made into clean text."""
    part = mail.message.get_body(preferencelist=("plain", "html"))
    if part is None or not isinstance(part, EmailMessage):
        return ""
    content = part.get_content()
    text = html_to_text(content) if part.get_content_type() == "text/html" else str(content)
    return text.replace("\r\n", "\n").strip()
