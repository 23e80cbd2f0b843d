import sys

from channel_servers.email.server import main

sys.exit(main())
