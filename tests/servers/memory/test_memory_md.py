"""MEMORY.md in a git repository per agent, with real git in a temporary directory."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import anyio
import pytest

from servers.memory.git import GitError, git_env, run_git
from servers.memory.guard import SecretBlocked, SecretGuard
from servers.memory.memory_md import MemoryFile, MemoryFileError, add_entry, remove_text

pytestmark = pytest.mark.anyio

GITHUB_PAT = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"


def memory(root: Path, agent: str = "ada", *, mode: str = "block", budget: int = 16_384) -> MemoryFile:
    return MemoryFile(root, agent, guard=SecretGuard(mode), budget_bytes=budget)  # type: ignore[arg-type]


async def git(repo: Path, *args: str) -> str:
    """Plain git, as an operator would run it to audit the repository."""
    result = await anyio.run_process(["git", "-C", str(repo), *args])
    return result.stdout.decode()


async def messages(m: MemoryFile) -> list[str]:
    return [r.message for r in await m.history()]


async def test_a_new_agent_has_an_empty_memory_no_history_and_no_directory(tmp_path: Path) -> None:
    m = memory(tmp_path)
    assert (await m.read(), await m.history(), (tmp_path / "ada").exists()) == ("", [], False)


async def test_append_creates_the_section_in_a_repository_of_the_agents_own(tmp_path: Path) -> None:
    m = memory(tmp_path)
    rev = await m.append("Preferences", "Prefers green tea", reason="the operator said so")
    repo = tmp_path / "ada"
    assert await m.read() == "## Preferences\n\n- Prefers green tea\n"
    assert await m.history() == [rev]
    assert (rev.message, len(rev.rev), rev.when.tzinfo is not None) == (
        "append: Prefers green tea\n\nthe operator said so",
        40,
        True,
    )
    assert (await git(repo, "rev-parse", "--show-toplevel")).strip() == str(repo.resolve())
    assert await git(repo, "log", "--format=%an <%ae>|%cn <%ce>|%s", "--", "MEMORY.md") == (
        "nexo <nexo@localhost>|nexo <nexo@localhost>|append: Prefers green tea\n"
    )
    assert (stat.S_IMODE(repo.stat().st_mode), stat.S_IMODE((repo / "MEMORY.md").stat().st_mode)) == (
        0o700,
        0o600,
    )


async def test_append_goes_to_the_end_of_its_section_before_the_next_one(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("Preferences", "Prefers tea", reason="")
    await m.append("People", "Ana is the sister", reason="")
    await m.append("preferences", "- Likes Lisbon\nespecially in spring", reason="")
    await m.append("## People", "Kenji is a colleague", reason="")
    assert await m.read() == (
        "## Preferences\n\n- Prefers tea\n- Likes Lisbon\n  especially in spring\n\n"
        "## People\n\n- Ana is the sister\n- Kenji is a colleague\n"
    )
    assert await messages(m) == [
        "append: Kenji is a colleague",
        "append: Likes Lisbon",
        "append: Ana is the sister",
        "append: Prefers tea",
    ]


async def test_duplicate_entries_bad_sections_empty_entries_and_unstorable_text_are_refused(
    tmp_path: Path,
) -> None:
    m = memory(tmp_path)
    await m.append("Preferences", "Prefers tea", reason="")
    with pytest.raises(MemoryFileError) as duplicate:
        await m.append("Preferences", "Prefers tea", reason="")
    with pytest.raises(MemoryFileError) as no_section:
        await m.append("##", "x", reason="")
    with pytest.raises(MemoryFileError) as empty:
        await m.append("Preferences", "  \n ", reason="")
    with pytest.raises(MemoryFileError) as surrogate:
        await m.replace("tea", "tea \ud800", reason="")
    assert [str(e.value) for e in (duplicate, no_section, empty, surrogate)] == [
        "'Prefers tea' is already in section 'Preferences'; nothing to add (use replace to change it)",
        "section '##' is not valid: expected one line of text of at most 120 characters, "
        "such as 'Preferences'",
        "the entry is empty; pass the text to remember, such as 'Prefers tea to coffee'",
        "the replacement text holds a character that cannot be stored as UTF-8 "
        "(an unpaired surrogate at position 4); remove it and try again",
    ]
    assert await messages(m) == ["append: Prefers tea"]


async def test_a_long_first_line_is_shortened_in_the_commit_subject(tmp_path: Path) -> None:
    appended = await memory(tmp_path).append("Notes", "x" * 100, reason="")
    promoted = await memory(tmp_path).append("Notes", "y" * 100, reason="", promotion=True)
    assert (appended.message, promoted.message) == (
        "append: " + "x" * 61 + "...",
        "promote: " + "y" * 60 + "...",
    )


async def test_replace_and_remove_edit_exact_text_and_name_the_section(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("Preferences", "Prefers tea", reason="")
    await m.append("Preferences", "Likes Lisbon", reason="")
    await m.append("People", "Ana is the sister", reason="")
    await m.replace("Prefers tea", "Prefers green tea", reason="more precise")
    await m.remove("Likes Lisbon", reason="moved away")
    await m.remove("the ", reason="style")
    assert await m.read() == "## Preferences\n\n- Prefers green tea\n\n## People\n\n- Ana is sister\n"
    assert (await messages(m))[:3] == [
        "edit: remove from section People\n\nstyle",
        "edit: remove from section Preferences\n\nmoved away",
        "edit: replace in section Preferences\n\nmore precise",
    ]


async def test_an_edit_before_the_first_section_says_so(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("People", "Ana", reason="")
    rev = await m.replace("## People", "# Memory of ada\n\n## People", reason="")
    assert (rev.message, await m.read()) == (
        "edit: replace in the preamble",
        "# Memory of ada\n\n## People\n\n- Ana\n",
    )


async def test_replace_and_remove_require_one_exact_occurrence(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("Preferences", "Prefers tea", reason="")
    await m.append("Preferences", "Prefers coffee", reason="")
    errors = []
    for call in (
        m.replace("Prefers", "Likes", reason=""),
        m.replace("Prefers juice", "Likes juice", reason=""),
        m.replace("Prefers tea", "Prefers tea", reason=""),
        m.remove("", reason=""),
        m.remove("e" * 100, reason=""),
    ):
        with pytest.raises(MemoryFileError) as caught:
            await call
        errors.append(str(caught.value))
    assert errors == [
        "'Prefers' occurs 2 times in MEMORY.md of agent 'ada'; include some surrounding text so that it "
        "matches exactly once",
        "'Prefers juice' does not occur in MEMORY.md of agent 'ada'; call read and copy the exact text, "
        "whitespace included",
        "replacing 'Prefers tea' with the same text changes nothing",
        "the text to find is empty; pass the exact text as shown by read",
        f"{'e' * 77 + '...'!r} does not occur in MEMORY.md of agent 'ada'; "
        "call read and copy the exact text, whitespace included",
    ]
    assert len(await m.history()) == 2


async def test_overlapping_occurrences_count_as_ambiguous(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("Notes", "aaa", reason="")
    with pytest.raises(MemoryFileError, match="'aa' occurs 2 times"):
        await m.replace("aa", "b", reason="")


@pytest.mark.parametrize(
    ("document", "cut", "expected"),
    [
        ("- a\n- b\n\n## S\n", "- b\n", "- a\n\n## S\n"),
        ("- a\n- b\n", "b", "- a\n"),
        ("- a\n- b c\n", "b ", "- a\n- c\n"),
        ("- a\n- Lisbon\n  in spring\n\n## P\n", "Lisbon\n  in spring", "- a\n\n## P\n"),
        ("intro\n- a", "a", "intro\n"),
    ],
)
def test_remove_drops_the_lines_a_cut_leaves_empty(document: str, cut: str, expected: str) -> None:
    start = document.index(cut)
    assert remove_text(document, start, start + len(cut)) == expected


def test_add_entry_puts_a_first_entry_after_a_blank_line_under_an_empty_heading() -> None:
    assert add_entry("# Title\n## Empty\n## Next\n", "empty", "x") == "# Title\n## Empty\n\n- x\n## Next\n"


async def test_history_lists_every_change_newest_first_and_honours_the_limit(tmp_path: Path) -> None:
    m = memory(tmp_path)
    revs = [await m.append("Log", f"entry {i}", reason=f"reason {i}") for i in range(4)]
    assert await m.history() == revs[::-1]
    assert await m.history(limit=2) == revs[:1:-1]
    with pytest.raises(MemoryFileError, match="limit must be between 1 and 1000, got 0"):
        await m.history(limit=0)
    assert (await git(tmp_path / "ada", "log", "--format=%s", "MEMORY.md")).splitlines() == [
        "append: entry 3",
        "append: entry 2",
        "append: entry 1",
        "append: entry 0",
    ]


async def test_rollback_restores_an_old_text_as_a_new_commit(tmp_path: Path) -> None:
    m = memory(tmp_path)
    first = await m.append("Preferences", "Prefers tea", reason="")
    text = await m.read()
    await m.replace("tea", "coffee", reason="changed mind")
    await m.append("People", "Ana", reason="")
    rolled = await m.rollback(first.rev[:7])
    assert (await m.read(), rolled.message) == (text, f"rollback to {first.rev[:12]}")
    assert await messages(m) == [
        f"rollback to {first.rev[:12]}",
        "append: Ana",
        "edit: replace in section Preferences\n\nchanged mind",
        "append: Prefers tea",
    ]


async def test_rollback_refuses_unknown_revisions_and_a_rollback_that_changes_nothing(tmp_path: Path) -> None:
    m = memory(tmp_path)
    errors = []
    with pytest.raises(MemoryFileError) as before_any_commit:
        await m.rollback("HEAD")
    errors.append(str(before_any_commit.value))
    assert not (tmp_path / "ada").exists()
    head = await m.append("Preferences", "Prefers tea", reason="")
    for rev in ("deadbeef", "--all", "", "HEAD\n", head.rev):
        with pytest.raises(MemoryFileError) as caught:
            await m.rollback(rev)
        errors.append(str(caught.value))
    unknown = (
        "unknown revision {} of MEMORY.md for agent 'ada'; "
        "call history to list revisions and pass one of their rev values"
    )
    assert errors == [
        *(unknown.format(repr(rev)) for rev in ("HEAD", "deadbeef", "--all", "", "HEAD\n")),
        f"MEMORY.md of agent 'ada' already matches revision {head.rev!r}; nothing to roll back",
    ]


async def test_the_budget_refuses_growth_with_the_sizes_and_the_fix_but_allows_shrinking(
    tmp_path: Path,
) -> None:
    m = memory(tmp_path, budget=40)
    await m.append("Notes", "one two three", reason="")
    with pytest.raises(MemoryFileError) as caught:
        await m.append("Notes", "four five six seven", reason="")
    assert str(caught.value) == (
        "MEMORY.md of agent 'ada' would grow to 48 bytes, over its budget of 40 bytes (it is 26 bytes now); "
        "remove entries or consolidate several into one shorter entry, then try again"
    )
    assert (await m.read(), len(await m.history())) == ("## Notes\n\n- one two three\n", 1)
    smaller = memory(tmp_path, budget=10)
    await smaller.replace("one two three", "one two", reason="shorter, still over the budget")
    assert await smaller.read() == "## Notes\n\n- one two\n"
    with pytest.raises(MemoryFileError, match="budget_bytes must be a positive number of bytes, got 0"):
        memory(tmp_path, budget=0)


async def test_the_guard_blocks_secrets_in_entries_sections_and_reasons_leaving_no_trace(
    tmp_path: Path,
) -> None:
    m = memory(tmp_path)
    await m.append("Tokens", "GitHub token lives in GITHUB_TOKEN", reason="")
    for call in (
        m.append("Tokens", f"token {GITHUB_PAT}", reason=""),
        m.append(f"Token {GITHUB_PAT}", "x", reason=""),
        m.append("Tokens", "x", reason=f"because {GITHUB_PAT}"),
        m.replace("GITHUB_TOKEN", GITHUB_PAT, reason=""),
    ):
        with pytest.raises(SecretBlocked) as caught:
            await call
        assert (caught.value.where, caught.value.rule_ids) == ("MEMORY.md", ("github-pat",))
    assert await m.read() == "## Tokens\n\n- GitHub token lives in GITHUB_TOKEN\n"
    assert GITHUB_PAT not in await git(tmp_path / "ada", "log", "-p", "--all")


async def test_in_redact_mode_the_redacted_text_is_what_lands_on_disk_and_in_git(tmp_path: Path) -> None:
    m = memory(tmp_path, mode="redact")
    rev = await m.append("Tokens", f"CI token {GITHUB_PAT}", reason=f"pasted {GITHUB_PAT}")
    assert (await m.read(), rev.message) == (
        "## Tokens\n\n- CI token [REDACTED:github-pat]\n",
        "append: CI token [REDACTED:github-pat]\n\npasted [REDACTED:github-pat]",
    )
    assert GITHUB_PAT not in await git(tmp_path / "ada", "log", "-p", "--all")


async def test_an_uncommitted_change_is_committed_as_a_recovery_before_the_next_write(tmp_path: Path) -> None:
    m = memory(tmp_path)
    await m.append("Notes", "one", reason="")
    (tmp_path / "ada" / "MEMORY.md").write_text("## Notes\n\n- one\n- written, then the process died\n")
    await m.append("Notes", "two", reason="")
    assert await m.read() == "## Notes\n\n- one\n- written, then the process died\n- two\n"
    assert await messages(m) == ["append: two", "recover: uncommitted change", "append: one"]
    assert await git(tmp_path / "ada", "status", "--porcelain") == ""


async def test_a_crash_before_the_first_commit_and_a_stale_index_lock_are_recovered(tmp_path: Path) -> None:
    repo = tmp_path / "ada"
    repo.mkdir()
    await run_git(repo, "init", "--quiet")
    (repo / "MEMORY.md").write_text("## Notes\n\n- never committed\n")
    (repo / ".git" / "index.lock").write_text("")
    m = memory(tmp_path)
    assert await m.history() == []
    await m.append("Notes", "next", reason="")
    assert await messages(m) == ["append: next", "recover: uncommitted change"]
    assert not (repo / ".git" / "index.lock").exists()


async def test_a_deleted_file_is_recorded_and_rolling_back_to_that_revision_empties_the_memory(
    tmp_path: Path,
) -> None:
    m = memory(tmp_path)
    await m.append("Notes", "one", reason="")
    (tmp_path / "ada" / "MEMORY.md").unlink()
    await m.append("Notes", "two", reason="")
    deleted = (await m.history())[1]
    assert deleted.message == "recover: uncommitted change"
    await m.rollback(deleted.rev)
    assert (await m.read(), (await m.history())[0].message) == ("", f"rollback to {deleted.rev[:12]}")


async def test_an_uncommitted_secret_is_refused_or_redacted_before_it_reaches_git(tmp_path: Path) -> None:
    blocking = memory(tmp_path)
    await blocking.append("Notes", "one", reason="")
    path = tmp_path / "ada" / "MEMORY.md"
    path.write_text(f"## Notes\n\n- one\n- hand-pasted {GITHUB_PAT}\n")
    with pytest.raises(SecretBlocked) as caught:
        await blocking.append("Notes", "two", reason="")
    assert caught.value.where == "uncommitted MEMORY.md"
    await memory(tmp_path, mode="redact").append("Notes", "two", reason="")
    assert path.read_text() == "## Notes\n\n- one\n- hand-pasted [REDACTED:github-pat]\n- two\n"
    assert GITHUB_PAT not in await git(tmp_path / "ada", "log", "-p", "--all")


@pytest.mark.parametrize("agent", ["", "..", "../ada", "a/b", "a\\b", "a b", "a.b", "é", "ada\n", "x" * 65])
def test_invalid_agent_ids_are_refused(tmp_path: Path, agent: str) -> None:
    with pytest.raises(MemoryFileError) as caught:
        memory(tmp_path, agent)
    assert str(caught.value) == (
        f"agent id {agent!r} is not valid: expected 1-64 letters, digits, '_' or '-' "
        "(no path separators, dots or spaces); use the agent id from the configuration"
    )


async def test_concurrent_writes_from_two_handles_on_one_agent_are_serialised(tmp_path: Path) -> None:
    handles = [memory(tmp_path), memory(tmp_path)]

    async def write(i: int) -> None:
        await handles[i % 2].append("Log", f"entry {i}", reason="")

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(write, i)
    text = await handles[0].read()
    assert (
        sorted(line for line in text.splitlines() if line.startswith("- ")),
        len(await handles[1].history()),
    ) == (
        sorted(f"- entry {i}" for i in range(8)),
        8,
    )


async def test_git_ignores_the_users_config_and_inherited_git_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = someone\n[commit]\n\tgpgsign = true\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "intruder")
    await memory(tmp_path / "root").append("Notes", "one", reason="")
    monkeypatch.delenv("GIT_DIR")
    assert await git(tmp_path / "root" / "ada", "log", "--format=%an %cn") == "nexo nexo\n"
    assert {
        k: v for k, v in git_env({"GIT_DIR": "x", "PATH": "/bin"}).items() if k in ("GIT_DIR", "PATH")
    } == {"PATH": "/bin"}


async def test_git_failures_name_the_command_and_what_git_said(tmp_path: Path) -> None:
    with pytest.raises(GitError) as failed:
        await run_git(tmp_path, "log")
    await run_git(tmp_path, "init", "--quiet")
    with pytest.raises(GitError) as nothing:
        await run_git(tmp_path, "commit", "--message", "the agent's words")
    with pytest.raises(GitError) as missing:
        await run_git(tmp_path, "status", executable=str(tmp_path / "no-git"))
    assert str(failed.value).startswith(
        f"git log failed in {tmp_path} with exit status 128: fatal: not a git"
    )
    assert str(nothing.value).startswith(f"git commit failed in {tmp_path} with exit status 1: On branch ")
    assert "the agent's words" not in str(nothing.value)
    assert (
        str(missing.value)
        == f"cannot run {str(tmp_path / 'no-git')!r}: it is not installed or not on PATH; install git"
    )


async def test_a_git_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    hang.write_text(f"#!{sys.executable}\nimport threading\nthreading.Event().wait()\n")
    hang.chmod(0o700)
    with pytest.raises(GitError) as caught:
        await run_git(tmp_path, "status", executable=str(hang), timeout=0.5)
    assert str(caught.value) == f"git status in {tmp_path} did not finish within 0.5s"
