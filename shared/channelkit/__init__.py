"""Building blocks every channel server shares: the outbox and the MCP side of the channel contract."""
