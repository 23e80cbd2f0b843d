"""The workspace tools' parameters: what each one is, its format, its bounds and an example."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

MAX_LINE_NUMBER = 2**31 - 1
SHELL_TIMEOUT_CEILING_S = 86_400
"""The highest NEXO_WORKSPACE_SHELL_TIMEOUT_MAX_S accepts; the operator's own cap is checked per call."""

PathArg = Annotated[
    str,
    Field(
        description="A path relative to the workspace root; it may not leave it.", examples=["notes/todo.md"]
    ),
]
OffsetArg = Annotated[
    int,
    Field(
        description="The 1-based line to start at; next_offset of a truncated read.",
        json_schema_extra={"minimum": 1, "maximum": MAX_LINE_NUMBER},
    ),
]
LineLimitArg = Annotated[
    int | None,
    Field(
        description="The most lines to read; omit to read up to max_read_bytes.",
        json_schema_extra={"minimum": 1, "maximum": MAX_LINE_NUMBER},
    ),
]
ContentArg = Annotated[str, Field(description="The whole new content of the file, UTF-8 text.")]
OldStringArg = Annotated[
    str, Field(description="The exact text to replace, whitespace included; it must occur once.")
]
NewStringArg = Annotated[str, Field(description="The text to put in its place.")]
ReplaceAllArg = Annotated[
    bool, Field(description="true replaces every occurrence of old_string instead of exactly one.")
]
DirectoryArg = Annotated[
    str,
    Field(description="A directory relative to the workspace root; '.' is the root.", examples=["src"]),
]
GlobArg = Annotated[
    str,
    Field(
        description="A glob relative to the workspace root: * and ? within a directory, ** across.",
        examples=["**/*.py"],
    ),
]
RegexArg = Annotated[str, Field(description="A Python regular expression.", examples=[r"def \w+_test"])]
SearchPathArg = Annotated[
    str, Field(description="The directory or file to search, relative to the workspace root.")
]
FileFilterArg = Annotated[
    str | None,
    Field(
        description="Only files matching this glob: a file name without '/', else a path under path.",
        examples=["*.py"],
    ),
]
IgnoreCaseArg = Annotated[bool, Field(description="true matches regardless of letter case.")]
CommandArg = Annotated[
    str,
    Field(description="The command line, run with /bin/sh -c in the workspace.", examples=["ls -la"]),
]
TimeoutArg = Annotated[
    float,
    Field(
        description=(
            "Seconds before the command and everything it started are killed; at most the "
            "operator's shell_timeout_max_s (workspace_info shows it)."
        ),
        json_schema_extra={"exclusiveMinimum": 0, "maximum": SHELL_TIMEOUT_CEILING_S},
    ),
]
