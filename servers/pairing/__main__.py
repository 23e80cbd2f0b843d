import sys

from servers.pairing.server import main

sys.exit(main())
