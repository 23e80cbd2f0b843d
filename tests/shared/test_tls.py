"""nexo's default TLS context is httpx2's, made without importing httpcore2 (``shared/tls.py``).

Both are made under the same environment and compared: the CA certificates loaded, the store's
counts and every setting that decides how a server is verified. A fresh interpreter checks that
making it imports neither httpcore2 nor truststore (on Linux).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

import shared.tls
from shared.tls import default_context
from tests.channel_servers.email.certificates import make_certificates

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="elsewhere it is httpx2's own")


def described(context: ssl.SSLContext) -> dict[str, Any]:
    return {
        "certificates": sorted(json.dumps(cert, sort_keys=True) for cert in context.get_ca_certs()),
        "store": context.cert_store_stats(),
        "verify_mode": context.verify_mode,
        "check_hostname": context.check_hostname,
        "verify_flags": context.verify_flags,
        "protocol": context.protocol,
        "minimum_version": context.minimum_version,
        "maximum_version": context.maximum_version,
        "options": context.options,
    }


@pytest.mark.parametrize("variable", [None, "SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_the_same_context_as_httpx2s_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str | None
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    certificates = make_certificates(tmp_path)
    if variable == "SSL_CERT_FILE":
        monkeypatch.setenv(variable, str(certificates.ca_file))
    elif variable == "SSL_CERT_DIR":
        monkeypatch.setenv(variable, str(tmp_path))
    ours = described(default_context())
    assert ours == described(httpx2.create_ssl_context())
    assert ours["verify_mode"] == ssl.CERT_REQUIRED
    assert ours["check_hostname"] is True
    if variable == "SSL_CERT_FILE":
        assert ours["store"]["x509_ca"] == 1


def test_without_usable_compiled_in_paths_the_distributions_bundle_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An interpreter built against an OpenSSL installed elsewhere: its compiled-in paths are missing.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    missing = ssl.DefaultVerifyPaths(
        "/nonexistent/cert.pem",
        "/nonexistent/certs",
        "SSL_CERT_FILE",
        "/nonexistent/cert.pem",
        "SSL_CERT_DIR",
        "/nonexistent/certs",
    )
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: missing)
    found = [name for name in shared.tls.CA_FILE_CANDIDATES if Path(name).is_file()]
    ours = described(default_context())
    assert ours == described(httpx2.create_ssl_context())
    if found:
        assert ours["store"]["x509_ca"] > 0


def test_making_it_imports_neither_httpcore2_nor_truststore() -> None:
    child = (
        "import sys, shared.tls; shared.tls.default_context(); "
        "print([name for name in ('httpcore2', 'truststore', 'h11') if name in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
