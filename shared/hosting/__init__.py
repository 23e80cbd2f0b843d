"""Run any nexo MCP server over stdio or Streamable HTTP.

This is the only package that touches the SDK's serving entry points, so the next SDK reshape stays
inside it. Over HTTP it enforces a bearer token on every bind, loopback included (one is generated
into a 0600 file when none is configured), DNS-rebinding protection with configurable allowed
hosts, and serves an unauthenticated ``/healthz``.

- :mod:`~shared.hosting.main`: ``server_main``, the whole ``__main__`` of a server, and its logging;
- :mod:`~shared.hosting.serve`: serving over stdio or HTTP until cancelled or signalled;
- :mod:`~shared.hosting.options`: ``--http HOST:PORT`` and the environment, as :class:`HttpOptions`;
- :mod:`~shared.hosting.tokens`: where a bearer token comes from, generated when none is set;
- :mod:`~shared.hosting.http_app`: the ASGI app at ``/mcp`` with ``/healthz``;
- :mod:`~shared.hosting.auth`: the bearer-token check in front of it;
- :mod:`~shared.hosting.listener`: binding a port and serving any ASGI app on it (no MCP);
- :mod:`~shared.hosting.lane`: nexo's control methods answered from the stdio pipe (the control lane);
- :mod:`~shared.hosting.capabilities`: what the SDK offers no public hook for;
- :mod:`~shared.hosting.errors`: :class:`HostingError`, a start that cannot go on as configured.
"""
