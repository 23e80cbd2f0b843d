import sys

from channel_servers.sample.server import main

sys.exit(main())
