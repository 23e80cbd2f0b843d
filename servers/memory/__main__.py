"""``python -m servers.memory``: long-term hybrid memory, session transcripts and MEMORY.md."""

import sys

from servers.memory.server import main

sys.exit(main())
