"""The Slack channel server: an app that answers DMs and mentions in threads, over Socket Mode."""
