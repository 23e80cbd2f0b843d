"""The sample channel: a local web page that chats with the agent over a WebSocket."""
