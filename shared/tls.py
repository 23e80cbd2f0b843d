"""The TLS context nexo's own HTTP clients verify servers with: httpx2's default, made without httpcore2.

``httpx2.create_ssl_context()`` imports the whole of httpcore2 (its HTTP/1.1 and HTTP/2 pools, h11,
truststore: 50 to 100 ms of a start's CPU) for one function, ``httpcore2.default_ssl_context``. nexo's
HTTP/1.1 transport (``shared.http1``) and the model providers need only that context, so on Linux
this module builds the same one from the standard library: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``,
else OpenSSL's compiled-in file or directory, else the first CA bundle found at a well-known place
(for interpreters built with an OpenSSL whose compiled-in paths do not exist on this system).
Elsewhere (macOS, Windows: the system's trust store through truststore) it is httpx2's own.
``tests/shared/test_tls.py`` checks that both give the same certificates and settings.
"""

from __future__ import annotations

import os
import re
import ssl
import sys
from pathlib import Path

CA_FILE_CANDIDATES = (
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/pki/tls/cert.pem",
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/ssl/ca-bundle.pem",
)
"""Where Linux distributions keep their CA bundle (the list httpcore2 and truststore use)."""
_HASHED = re.compile(r"[0-9a-fA-F]{8}\.\d")


def default_context() -> ssl.SSLContext:
    """A client context that verifies servers as httpx2's default one does."""
    if not sys.platform.startswith("linux"):
        import httpx2

        return httpx2.create_ssl_context()
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    paths = ssl.get_default_verify_paths()
    file = paths.openssl_cafile if Path(paths.openssl_cafile).is_file() else None
    directory = paths.openssl_capath if Path(paths.openssl_capath).is_dir() else None
    if (
        directory
        and not file
        and not any(_HASHED.fullmatch(entry.name) for entry in Path(directory).iterdir())
    ):
        directory = None  # a directory without hashed certificate links verifies nothing
    if not file and not directory:
        file = next((name for name in CA_FILE_CANDIDATES if Path(name).is_file()), None)
    if file or directory:
        context.load_verify_locations(file, directory)
    return context
