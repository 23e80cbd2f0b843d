"""The WhatsApp channel: ``python -m channel_servers.whatsapp``."""

import sys

from channel_servers.whatsapp.server import main

sys.exit(main())
