import sys

from channel_servers.webhook.server import main

sys.exit(main())
