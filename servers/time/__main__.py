import sys

from servers.time.server import main

sys.exit(main())
