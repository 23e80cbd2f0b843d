"""The cron server: durable schedules that fire prompts at the agent."""
