"""The operator's dashboard: server-rendered pages over the daemon's control socket.

Served by ``nexo run`` on loopback when ``dashboard.port`` is set; ``nexo dashboard`` prints a
one-time login link. It keeps no state of its own: every page asks the running daemon, the way the
CLI does. Nothing here is imported by the loop.
"""
