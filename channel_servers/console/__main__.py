import sys

from channel_servers.console.server import main

sys.exit(main())
