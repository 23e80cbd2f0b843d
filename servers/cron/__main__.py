import sys

from servers.cron.server import main

sys.exit(main())
