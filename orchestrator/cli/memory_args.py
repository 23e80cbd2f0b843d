"""The arguments of ``nexo memory ...``, kept apart from running it: ``nexo --help`` and every other
command build this parser without importing the memory wire models (and the MCP types under them)."""

from __future__ import annotations

import argparse
from typing import Any

from shared.protocol import memory_terms as terms

LIST_LIMIT = 100
JSON_HELP = "print the result as JSON on stdout"
AGENT_HELP = "agent id (default: the first agent of the config)"


def add_memory_parser(sub: Any) -> None:
    memory = sub.add_parser("memory", help="search, list, export, import and maintain the agent's memory")
    commands = memory.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")

    def command(name: str, help_text: str, *, json_output: bool = True) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
        parser.add_argument("--config", help="YAML config (default: $NEXO_CONFIG or the built-in defaults)")
        if json_output:
            parser.add_argument("--json", action="store_true", help=JSON_HELP)
        return parser

    search = command("search", "recall memories like the agent would (without touching their access counts)")
    search.add_argument("query", help="what to recall, in words")
    search.add_argument("--agent", help=AGENT_HELP)
    search.add_argument("--mode", choices=terms.RECALL_MODES, default="hybrid", help="default hybrid")
    search.add_argument("--limit", type=int, default=8, help=f"1 to {terms.MAX_SEARCH_LIMIT} (default 8)")

    listing = command("list", "list memories, oldest first")
    listing.add_argument("--agent", help="only this agent's (default: every agent's)")
    listing.add_argument("--kind", choices=terms.KINDS, help="only memories of this kind")
    listing.add_argument(
        "--limit",
        type=int,
        default=LIST_LIMIT,
        help=f"at most this many (default {LIST_LIMIT}, 0 for all); the rest is counted on stderr",
    )

    forget = command("forget", "delete one memory for good")
    forget.add_argument("id", type=int, help="the memory's id, as `nexo memory list` or `search` shows it")

    export = command("export", "write memories as JSON lines (one record per line)", json_output=False)
    export.add_argument("--agent", help="only this agent's (default: every agent's)")
    export.add_argument("--output", "-o", help="file to write (default: standard output)")

    importing = command("import", "add memories from a JSON lines file written by export")
    importing.add_argument(
        "file", help="a JSON lines file, one record per line, as `nexo memory export` writes"
    )

    reindex = command("reindex", "re-embed every memory with the configured embedding model")
    reindex.add_argument(
        "--batch-size",
        type=int,
        default=64,
        help=f"memories per step, 1 to {terms.MAX_REINDEX_BATCH} (default 64)",
    )

    history = command("history", "the revisions of the agent's MEMORY.md, newest first")
    history.add_argument("--agent", help=AGENT_HELP)
    history.add_argument(
        "--limit", type=int, default=20, help=f"how many revisions, 1 to {terms.MAX_HISTORY} (default 20)"
    )

    rollback = command("rollback", "restore the agent's MEMORY.md as it was at a revision")
    rollback.add_argument("rev", help="a revision from `nexo memory history` (full or at least 4 characters)")
    rollback.add_argument("--agent", help=AGENT_HELP)

    command("stats", "counts per agent, kind and provenance; database and index sizes")
