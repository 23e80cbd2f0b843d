"""The Telegram channel server: a bot that answers the operator and paired contacts on their phones."""
