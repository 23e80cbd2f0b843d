"""Wire contracts shared by the orchestrator, the servers and the channel servers."""
