"""Permission prompts by mail: one mail to each approver address, answered by ``yes <id>`` / ``no <id>``.

The answer is the first non-empty line of the reply's text, so a quoted prompt below it does not
count. Only an approver address's mail is read as an answer, and that mail has passed the
authentication policy like every other (the orchestrator still decides whose answer counts).
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from channel_servers.email.settings import EmailSettings
from channel_servers.email.smtp import SmtpSender
from shared.protocol.channel import PermissionRequestParams, parse_permission_reply


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def answer_in(text: str, sender: str, settings: EmailSettings) -> str | None:
    """``yes <id>`` / ``no <id>`` when the mail is an approver's answer, else None."""
    line = first_line(text)
    if sender not in settings.approvers or parse_permission_reply(line) is None:
        return None
    return line


def prompt_mail(settings: EmailSettings, approver: str, params: PermissionRequestParams) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.address
    message["To"] = approver
    message["Subject"] = f"Approve {params.tool_name}? ({params.request_id})"
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=settings.address.rpartition("@")[2])
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(
        f"The agent asks to run {params.tool_name}.\n\n{params.description}\n\n{params.input_preview}\n\n"
        f"Reply with 'yes {params.request_id}' to allow or 'no {params.request_id}' to deny, "
        "as the first line of your reply."
    )
    return message


async def show(settings: EmailSettings, smtp: SmtpSender, params: PermissionRequestParams) -> int:
    """Mail the prompt to every approver; returns how many mails left (0: nobody will see it)."""
    shown = 0
    for approver in settings.approvers:
        await smtp.send(prompt_mail(settings, approver, params))
        shown += 1
    return shown
