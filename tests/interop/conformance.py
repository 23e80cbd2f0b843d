"""Run the MCP conformance suite against a nexo server and compare it with docs/interop.md.

The suite (``@modelcontextprotocol/conformance`` on npm) needs Node 22 or newer; both come from the
npm registry into a cache directory (``NEXO_CONFORMANCE_CACHE``, default ``~/.cache/nexo/conformance``),
so the machine's own Node (20 on Debian bookworm) only has to provide ``npm``.

``python -m tests.interop.conformance`` prints the table for docs/interop.md from a fresh run.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.http_server import http_server
from tests.interop import npm
from tests.interop.token_proxy import token_proxy

REPO = Path(__file__).resolve().parents[2]
INTEROP_DOC = REPO / "docs" / "interop.md"
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.1.16"
SERVER_MODULE = "servers.time"
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300
READY_TIMEOUT_S = 60
TABLE_START = "<!-- conformance table: start -->"
TABLE_END = "<!-- conformance table: end -->"
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_ROW = re.compile(r"^\|\s*`(?P<scenario>[^`]+)`\s*\|\s*(?P<result>pass|fail)\s*\|\s*(?P<why>.*?)\s*\|$")


@dataclass(frozen=True, slots=True)
class Suite:
    node: Path
    entry: Path

    def node_version(self) -> str:
        return subprocess.run(
            [str(self.node), "--version"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    result: str
    why: str


def cache_dir() -> Path:
    return npm.cache_dir("NEXO_CONFORMANCE_CACHE", "conformance")


def install(cache: Path) -> Suite:
    """Node 22 and the pinned suite in ``cache`` (installed once, reused after)."""
    suite = Suite(
        node=npm.node_in(cache),
        entry=cache / "node_modules" / SUITE_PACKAGE / "dist" / "index.js",
    )
    npm.npm_install(cache, SUITE_PACKAGE, SUITE_VERSION, suite.entry, timeout_s=INSTALL_TIMEOUT_S)
    return suite


def run_suite(suite: Suite, url: str, output: Path) -> dict[str, bool]:
    """Every server scenario of the active suite against ``url``: scenario -> passed."""
    subprocess.run(
        [str(suite.node), str(suite.entry), "server", "--url", url, "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    results: dict[str, bool] = {}
    for directory in sorted(output.iterdir()):
        match = _RESULT_DIR.match(directory.name)
        if match is None:
            continue
        checks = json.loads((directory / "checks.json").read_text())
        results[match.group("scenario")] = bool(checks) and all(
            check["status"] in ("SUCCESS", "INFO") for check in checks
        )
    return results


def documented() -> tuple[dict[str, str], list[Row]]:
    """The header facts (suite, node) and the rows of the table in docs/interop.md."""
    text = INTEROP_DOC.read_text()
    block = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    facts = dict(re.findall(r"^- (suite|node|server): `([^`]+)`", block, flags=re.MULTILINE))
    rows = [
        Row(m.group("scenario"), m.group("result"), m.group("why"))
        for line in block.splitlines()
        if (m := _ROW.match(line.strip()))
    ]
    return facts, rows


def measure() -> tuple[Suite, dict[str, bool]]:
    """Install the suite, start the server with a token, and run the suite through a proxy that
    sends the token (the suite's command line cannot)."""
    suite = install(cache_dir())
    token = secrets.token_urlsafe(24)
    with (
        tempfile.TemporaryDirectory(prefix="nexo-conformance-") as scratch,
        http_server(SERVER_MODULE, Path(scratch) / "state", token) as url,
        token_proxy(url, token) as proxied,
    ):
        return suite, run_suite(suite, proxied, Path(scratch) / "results")


def main() -> int:
    suite, results = measure()
    _, rows = documented()
    reasons = {row.scenario: row.why for row in rows}
    print(f"- suite: `{SUITE_PACKAGE}@{SUITE_VERSION}`")
    print(f"- node: `{suite.node_version()}`")
    print(f"- server: `python -m {SERVER_MODULE} --http 127.0.0.1:0`")
    print()
    print("| scenario | result | why |")
    print("|---|---|---|")
    for scenario, passed in results.items():
        print(f"| `{scenario}` | {'pass' if passed else 'fail'} | {reasons.get(scenario, '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
