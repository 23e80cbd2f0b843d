"""The cron contract's method names that ``nexo cron`` sends through the running daemon, without the
wire models (:mod:`shared.protocol.cron` builds its requests on the same values): importing it costs
no pydantic."""

from __future__ import annotations

LIST_METHOD = "nexo/cron/list"
