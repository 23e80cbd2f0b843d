import sys

from channel_servers.telegram.server import main

sys.exit(main())
