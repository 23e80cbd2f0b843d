"""The console channel: the operator talks to the agent from a terminal with ``nexo chat``."""
