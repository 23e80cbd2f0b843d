"""Building blocks every channel server shares: the outbox and the MCP side of the channel contract.

A new channel needs only the kit: ``from shared.channelkit import define_channel, ChannelSettings``.
"""

from shared.channelkit.delivery import KeyedSend, SendFailed, SendFile, SendResult, Unreachable, WasDelivered
from shared.channelkit.kit import Channel, Received, define_channel
from shared.channelkit.media import Attachment, TooLarge, message_content, save_inbound_file
from shared.channelkit.prompts import Closed, PromptClosed
from shared.channelkit.running import channel_main, serve_asgi
from shared.channelkit.settings import ChannelSettings
from shared.channelkit.typing import Show, Typing
from shared.events import EventLogFull

__all__ = [
    "Attachment",
    "Channel",
    "ChannelSettings",
    "Closed",
    "EventLogFull",
    "KeyedSend",
    "PromptClosed",
    "Received",
    "SendFailed",
    "SendFile",
    "SendResult",
    "Show",
    "TooLarge",
    "Typing",
    "Unreachable",
    "WasDelivered",
    "channel_main",
    "define_channel",
    "message_content",
    "save_inbound_file",
    "serve_asgi",
]
