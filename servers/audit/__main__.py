import sys

from servers.audit.server import main

sys.exit(main())
