"""The small modules a caller imports for one name import nothing heavy.

A channel's web side, the metrics endpoint and the dashboard bind and serve through
``shared.hosting.listener``; a channel raises ``shared.hosting.errors.HostingError``; ``nexo audit``
checks its arguments against ``shared.protocol.audit.terms``. None of them needs the MCP SDK or
pydantic, so a fresh interpreter that imports all three holds neither.
"""

from __future__ import annotations

import json
import subprocess
import sys

IMPORT_THE_LIGHT_MODULES = """
import json, sys
import shared.hosting.errors, shared.hosting.listener, shared.protocol.audit.terms
print(json.dumps(sorted(sys.modules)))
"""

HEAVY = ("mcp", "mcp_types", "pydantic", "pydantic_core", "uvicorn", "httpx2")


def test_the_listener_the_hosting_error_and_the_audit_terms_import_neither_the_sdk_nor_pydantic() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_LIGHT_MODULES],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = json.loads(result.stdout)
    assert "shared.hosting.listener" in modules
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
