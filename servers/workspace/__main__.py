"""``python -m servers.workspace``: files and shell commands confined to the agent's workspace."""

import sys

from servers.workspace.server import main

sys.exit(main())
