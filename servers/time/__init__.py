"""The time server: what time it is for the operator, and conversions between time zones."""
