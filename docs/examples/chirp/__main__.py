import sys

from docs.examples.chirp.server import main

sys.exit(main())
