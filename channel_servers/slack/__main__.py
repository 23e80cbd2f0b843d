import sys

from channel_servers.slack.server import main

sys.exit(main())
