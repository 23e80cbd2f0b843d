"""The webhook channel: signed HTTP webhooks from other services become durable events for the agent."""
