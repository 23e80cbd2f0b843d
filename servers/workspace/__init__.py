"""The workspace server: read, write, edit, glob and grep files and run shell commands, all confined
to the agent's workspace directory (shell commands inside bubblewrap when it is available)."""
