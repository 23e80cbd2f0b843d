import sqlite3
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
import sqlean
import sqlite_vec

from shared.db import (
    VEC_DRIVERS,
    Database,
    DatabaseError,
    Migration,
    Synchronous,
    _drivers,
    split_statements,
    sqlite_driver_for_vec,
)
from shared.db._drivers import as_stdlib_error

pytestmark = pytest.mark.anyio

EVENTS = Migration.sql("0001_events", "CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL);")
COUNTER = Migration.sql(
    "0002_counter", "CREATE TABLE counter(n INTEGER NOT NULL); INSERT INTO counter(n) VALUES (0);"
)
VEC_FIX = "pip install sqlean.py (it bundles an SQLite that can load extensions)"


def committed_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """What another process would see: only committed data."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def set_mode(path: Path, mode: int) -> None:
    path.chmod(mode)


def listing(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "server.sqlite3"


@pytest.fixture
def stdlib_cannot_load_extensions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make the outcome the same on Python builds whose sqlite3 can load extensions."""
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "sqlite3", SimpleNamespace(Connection=object))
        yield


# --- migrations ---------------------------------------------------------------------------------


async def test_fresh_database_applies_migrations_in_order_and_records_them(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS, COUNTER]) as db:
        recorded = await db.fetchall("SELECT name FROM _migrations ORDER BY rowid")
        counter = await db.fetchall("SELECT n FROM counter")
        applied_at = await db.fetchone("SELECT applied_at FROM _migrations WHERE name = '0001_events'")
    assert recorded == [("0001_events",), ("0002_counter",)]
    assert counter == [(0,)]
    assert applied_at is not None
    assert applied_at[0].endswith("+00:00")


async def test_reopening_applies_only_the_new_migrations(db_path: Path) -> None:
    calls: list[str] = []

    def counted(name: str) -> Migration:
        def apply(conn: sqlite3.Connection) -> None:
            calls.append(name)
            conn.execute(f"CREATE TABLE t{name}(x)")

        return Migration(name, apply)

    async with Database.open(db_path, [counted("1")]):
        pass
    async with Database.open(db_path, [counted("1"), counted("2")]) as db:
        recorded = await db.fetchall("SELECT name FROM _migrations ORDER BY rowid")
    assert calls == ["1", "2"]
    assert recorded == [("1",), ("2",)]


async def test_database_with_an_unknown_migration_is_refused_naming_it(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS, COUNTER]):
        pass
    with pytest.raises(DatabaseError) as caught:
        async with Database.open(db_path, [EVENTS]):
            pass
    assert str(caught.value) == (
        f"{db_path}: the database has migration(s) 0002_counter that this version does not know "
        "(it was written by a newer version). "
        "Fix: run the newer version again, or restore a backup taken before it ran"
    )


async def test_failed_migration_rolls_back_and_is_not_recorded(db_path: Path) -> None:
    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half(x)")
        conn.execute("INSERT INTO missing_table VALUES (1)")

    with pytest.raises(DatabaseError) as caught:
        async with Database.open(db_path, [EVENTS, Migration("0002_half", half_done)]):
            pass
    assert str(caught.value) == (
        f"{db_path}: migration 0002_half failed and was rolled back: no such table: missing_table. "
        "Fix: correct the migration; the database is as it was before it"
    )
    assert committed_rows(db_path, "SELECT name FROM _migrations") == [("0001_events",)]
    assert committed_rows(db_path, "SELECT name FROM sqlite_master WHERE name = 'half'") == []


async def test_migration_that_commits_by_itself_is_reported(db_path: Path) -> None:
    def uses_executescript(conn: sqlite3.Connection) -> None:
        conn.executescript("CREATE TABLE scripted(x);")

    with pytest.raises(DatabaseError) as caught:
        async with Database.open(db_path, [Migration("0001_scripted", uses_executescript)]):
            pass
    assert str(caught.value) == (
        f"{db_path}: migration 0001_scripted ended its own transaction, so it was not atomic. "
        "Fix: run statements with conn.execute or use Migration.sql (executescript commits first)"
    )
    assert committed_rows(db_path, "SELECT name FROM _migrations") == []


async def test_migration_that_fails_after_committing_says_it_may_be_partly_applied(db_path: Path) -> None:
    def commits_then_fails(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE early(x)")
        conn.execute("COMMIT")
        raise ValueError("boom")

    with pytest.raises(DatabaseError) as caught:
        async with Database.open(db_path, [Migration("0001_early", commits_then_fails)]):
            pass
    assert str(caught.value) == (
        f"{db_path}: migration 0001_early failed after ending its own transaction: boom. "
        "Fix: correct the migration and restore a backup: part of it may have been applied"
    )


async def test_migration_recorded_meanwhile_by_another_writer_is_skipped(db_path: Path) -> None:
    applied: list[str] = []

    def first(conn: sqlite3.Connection) -> None:
        applied.append("first")
        # Stands in for another process recording the next migration after our initial read.
        conn.execute("INSERT INTO _migrations(name, applied_at) VALUES ('0002_second', 'elsewhere')")

    def second(conn: sqlite3.Connection) -> None:
        applied.append("second")

    async with Database.open(db_path, [Migration("0001_first", first), Migration("0002_second", second)]):
        pass
    assert applied == ["first"]


def test_sql_script_is_split_into_single_statements() -> None:
    script = """
        CREATE TABLE a(x TEXT DEFAULT ';');
        CREATE TRIGGER a_ins AFTER INSERT ON a BEGIN UPDATE a SET x = 'b;c'; END;
        -- a comment; with a semicolon
        CREATE INDEX a_x ON a(x)
    """
    assert split_statements(script) == [
        "CREATE TABLE a(x TEXT DEFAULT ';');",
        "CREATE TRIGGER a_ins AFTER INSERT ON a BEGIN UPDATE a SET x = 'b;c'; END;",
        "-- a comment; with a semicolon\n        CREATE INDEX a_x ON a(x)",
    ]


async def test_sql_migration_with_a_trigger_is_applied(db_path: Path) -> None:
    migration = Migration.sql(
        "0001_trigger",
        """
        CREATE TABLE a(x TEXT);
        CREATE TABLE log(x TEXT);
        CREATE TRIGGER a_ins AFTER INSERT ON a BEGIN INSERT INTO log VALUES (new.x || ';'); END;
        """,
    )
    async with Database.open(db_path, [migration]) as db:
        await db.execute("INSERT INTO a VALUES ('hi')")
        logged = await db.fetchall("SELECT x FROM log")
    assert logged == [("hi;",)]


# --- opening ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("synchronous", "level"), [("OFF", 0), ("NORMAL", 1), ("FULL", 2), ("EXTRA", 3)])
async def test_pragmas_are_what_was_asked(db_path: Path, synchronous: Synchronous, level: int) -> None:
    async with Database.open(db_path, synchronous=synchronous, busy_timeout_ms=1234) as db:
        pragmas = [
            await db.fetchone("PRAGMA journal_mode"),
            await db.fetchone("PRAGMA synchronous"),
            await db.fetchone("PRAGMA busy_timeout"),
            await db.fetchone("PRAGMA foreign_keys"),
        ]
    assert pragmas == [("wal",), (level,), (1234,), (1,)]


async def test_defaults_are_full_sync_and_five_second_busy_timeout(db_path: Path) -> None:
    async with Database.open(db_path) as db:
        pragmas = [await db.fetchone("PRAGMA synchronous"), await db.fetchone("PRAGMA busy_timeout")]
    assert (db.driver, db.vec_version, db.path, pragmas) == ("sqlite3", None, db_path, [(2,), (5000,)])


async def test_new_directories_and_database_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "server.sqlite3"
    async with Database.open(path, [EVENTS]) as db:
        await db.execute("INSERT INTO events(body) VALUES ('x')")
        modes = {
            "a": mode_of(tmp_path / "a"),
            "b": mode_of(tmp_path / "a" / "b"),
            "db": mode_of(path),
            "wal": mode_of(Path(f"{path}-wal")),
        }
    assert modes == {"a": 0o700, "b": 0o700, "db": 0o600, "wal": 0o600}


async def test_existing_database_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "server.sqlite3"
    async with Database.open(path, [EVENTS]) as db:
        await db.execute("INSERT INTO events(body) VALUES ('x')")
    set_mode(path, 0o644)
    set_mode(tmp_path, 0o755)
    async with Database.open(path, [EVENTS]):
        pass
    # An existing parent directory is not ours to change.
    assert (mode_of(path), mode_of(tmp_path)) == (0o600, 0o755)


async def test_path_under_a_regular_file_is_refused_with_a_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(DatabaseError) as caught:
        async with Database.open(blocker / "server.sqlite3"):
            pass
    assert str(caught.value) == (
        f"{blocker / 'server.sqlite3'}: cannot create the database file: Not a directory "
        f"({blocker / 'server.sqlite3'}). Fix: point the state directory at a place this user can write"
    )


async def test_file_that_is_not_a_database_is_refused_with_a_fix(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is not an sqlite database at all" * 100)
    with pytest.raises(DatabaseError) as caught:
        async with Database.open(path):
            pass
    assert str(caught.value) == (
        f"{path}: cannot open the database: file is not a database. "
        "Fix: check the file is an SQLite database (restore it from a backup if it is damaged)"
    )


@pytest.mark.parametrize(
    ("path", "options", "message"),
    [
        (":memory:", {}, ":memory:: in-memory databases are not supported. Fix: give a file path"),
        (
            "x.db",
            {"synchronous": "LAZY"},
            "x.db: synchronous='LAZY' is not a mode. Fix: use one of OFF, NORMAL, FULL, EXTRA",
        ),
        (
            "x.db",
            {"busy_timeout_ms": -1},
            "x.db: busy_timeout_ms=-1 is invalid. Fix: use a whole number >= 0",
        ),
        (
            "x.db",
            {"busy_timeout_ms": True},
            "x.db: busy_timeout_ms=True is invalid. Fix: use a whole number >= 0",
        ),
        (
            "x.db",
            {"migrations": [EVENTS, COUNTER, EVENTS]},
            "x.db: migration names repeat: 0001_events. Fix: give each one a new name",
        ),
    ],
)
async def test_invalid_options_are_refused_before_touching_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, options: dict[str, Any], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatabaseError) as caught:
        async with Database.open(path, **options):
            pass
    assert (str(caught.value), listing(tmp_path)) == (message, [])


# --- statements ---------------------------------------------------------------------------------


async def test_statements_outside_a_transaction_commit_at_once(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db:
        first = await db.insert("INSERT INTO events(body) VALUES (?)", ("a",))
        second = await db.insert("INSERT INTO events(body) VALUES (:body)", {"body": "b"})
        updated = await db.execute("UPDATE events SET body = upper(body)")
        seen_outside = committed_rows(db_path, "SELECT id, body FROM events ORDER BY id")
        one = await db.fetchone("SELECT body FROM events WHERE id = ?", (second,))
        none = await db.fetchone("SELECT body FROM events WHERE id = 99")
    assert (first, second, updated, seen_outside, one, none) == (1, 2, 2, [(1, "A"), (2, "B")], ("B",), None)


async def test_executemany_is_all_or_nothing(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db:
        await db.executemany("INSERT INTO events(id, body) VALUES (?, ?)", [(1, "a"), (2, "b")])
        with pytest.raises(sqlite3.IntegrityError):
            await db.executemany("INSERT INTO events(id, body) VALUES (?, ?)", [(3, "c"), (1, "dup")])
        rows = await db.fetchall("SELECT id, body FROM events ORDER BY id")
    assert rows == [(1, "a"), (2, "b")]


async def test_transaction_commits_when_the_block_succeeds(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db, db.transaction() as tx:
        rowid = await tx.insert("INSERT INTO events(body) VALUES ('a')")
        await tx.executemany("INSERT INTO events(body) VALUES (?)", [("b",), ("c",)])
        changed = await tx.execute("UPDATE events SET body = body || '!' WHERE id > ?", (rowid,))
        inside = await tx.fetchall("SELECT body FROM events ORDER BY id")
        first = await tx.fetchone("SELECT body FROM events ORDER BY id")
        assert committed_rows(db_path, "SELECT count(*) FROM events") == [(0,)]
    assert (changed, inside, first) == (2, [("a",), ("b!",), ("c!",)], ("a",))
    assert committed_rows(db_path, "SELECT body FROM events ORDER BY id") == [("a",), ("b!",), ("c!",)]


async def test_transaction_rolls_back_when_the_block_raises(db_path: Path) -> None:
    async def insert_then_fail(db: Database) -> None:
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO events(body) VALUES ('a')")
            await db.execute("INSERT INTO events(body) VALUES ('joined')")
            raise RuntimeError("boom")

    async with Database.open(db_path, [EVENTS]) as db:
        with pytest.raises(RuntimeError, match="boom"):
            await insert_then_fail(db)
        rows = await db.fetchall("SELECT body FROM events")
    assert rows == []


async def test_cancelled_transaction_rolls_back(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db:
        with anyio.CancelScope() as scope:
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO events(body) VALUES ('a')")
                scope.cancel()
                await tx.execute("INSERT INTO events(body) VALUES ('b')")
        rows = await db.fetchall("SELECT body FROM events")
    assert (scope.cancelled_caught, rows) == (True, [])


async def test_failed_commit_rolls_back_and_leaves_the_database_usable(db_path: Path) -> None:
    schema = Migration.sql(
        "0001_fk",
        """
        CREATE TABLE parent(id INTEGER PRIMARY KEY);
        CREATE TABLE child(parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
        """,
    )
    async with Database.open(db_path, [schema]) as db:
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY constraint failed"):
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO child VALUES (42)")
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO parent VALUES (42)")
            await tx.execute("INSERT INTO child VALUES (42)")
        rows = await db.fetchall("SELECT parent_id FROM child")
    assert rows == [(42,)]


async def _insert_in_transaction(db: Database, body: str) -> None:
    async with db.transaction() as tx:
        await tx.execute("INSERT INTO events(body) VALUES (?)", (body,))
        raise AssertionError("the statement after BEGIN must not run")


async def test_busy_database_reports_the_lock_error(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS], busy_timeout_ms=0) as db:
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            # The transaction begins with its first statement: that statement meets the lock.
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                await _insert_in_transaction(db, "during")
            other.execute("ROLLBACK")
        finally:
            other.close()
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO events(body) VALUES ('after')")
        rows = await db.fetchall("SELECT body FROM events")
    assert rows == [("after",)]


async def test_concurrent_transactions_never_interleave(db_path: Path) -> None:
    async def increment(db: Database) -> None:
        async with db.transaction() as tx:
            row = await tx.fetchone("SELECT n FROM counter")
            assert row is not None
            await tx.execute("UPDATE counter SET n = ?", (row[0] + 1,))

    async with Database.open(db_path, [EVENTS, COUNTER]) as db:
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(increment, db)
        final = await db.fetchall("SELECT n FROM counter")
    assert final == [(50,)]


async def test_statement_outside_a_transaction_never_sees_its_uncommitted_rows(db_path: Path) -> None:
    inserted = anyio.Event()
    release = anyio.Event()
    seen: list[list[tuple[Any, ...]]] = []

    async def insert_wait_and_undo(db: Database) -> None:
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO events(body) VALUES ('uncommitted')")
            inserted.set()
            await release.wait()
            raise RuntimeError("undo")

    async def writer(db: Database) -> None:
        with pytest.raises(RuntimeError, match="undo"):
            await insert_wait_and_undo(db)

    async def reader(db: Database) -> None:
        seen.append(await db.fetchall("SELECT body FROM events"))

    async with Database.open(db_path, [EVENTS]) as db, anyio.create_task_group() as tg:
        tg.start_soon(writer, db)
        await inserted.wait()
        tg.start_soon(reader, db)
        # Without the lock the reader's query would now be queued ahead of the writer's ROLLBACK.
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert seen == [[]]


async def test_child_tasks_started_inside_a_transaction_join_it(db_path: Path) -> None:
    seen_inside: list[list[tuple[Any, ...]]] = []

    async def children_then_fail(db: Database) -> None:
        async with db.transaction():
            async with anyio.create_task_group() as tg:
                tg.start_soon(db.execute, "INSERT INTO events(body) VALUES ('child')")
                tg.start_soon(db.executemany, "INSERT INTO events(body) VALUES (?)", [("many",)])
            seen_inside.append(await db.fetchall("SELECT body FROM events ORDER BY id"))
            raise RuntimeError("undo")

    async with Database.open(db_path, [EVENTS]) as db:
        with pytest.raises(RuntimeError, match="undo"):
            await children_then_fail(db)
        rows = await db.fetchall("SELECT body FROM events")
    assert (seen_inside, rows) == ([[("child",), ("many",)]], [])


async def test_nested_transaction_is_refused(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db, db.transaction():
        with pytest.raises(DatabaseError) as caught:
            async with db.transaction():
                pass
    assert str(caught.value) == (
        f"{db_path}: transaction() was entered while this task is already inside one. "
        "Fix: run the statements on the Transaction you already have (transactions do not nest)"
    )


async def test_transaction_used_after_its_block_is_refused(db_path: Path) -> None:
    async with Database.open(db_path, [EVENTS]) as db:
        async with db.transaction() as tx:
            pass
        with pytest.raises(DatabaseError) as caught:
            await tx.execute("INSERT INTO events(body) VALUES ('late')")
        rows = await db.fetchall("SELECT body FROM events")
    assert (str(caught.value), rows) == (
        f"{db_path}: the transaction is already finished. "
        "Fix: use the Transaction only inside its `async with db.transaction()` block",
        [],
    )


async def test_fts5_is_available(db_path: Path) -> None:
    async with Database.open(db_path) as db:
        await db.execute("CREATE VIRTUAL TABLE notes USING fts5(body)")
        await db.executemany("INSERT INTO notes(body) VALUES (?)", [("buy milk",), ("walk the dog",)])
        hits = await db.fetchall("SELECT body FROM notes WHERE notes MATCH 'dog'")
    assert hits == [("walk the dog",)]


# --- sqlite-vec ---------------------------------------------------------------------------------


def vector(*values: float) -> bytes:
    return struct.pack(f"{len(values)}f", *values)


async def test_vec_loads_and_a_vec0_table_answers_knn_queries(db_path: Path) -> None:
    async with Database.open(db_path, load_vec=True) as db:
        await db.execute("CREATE VIRTUAL TABLE v USING vec0(embedding float[4])")
        await db.executemany(
            "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
            [(1, vector(1, 0, 0, 0)), (2, vector(0, 1, 0, 0)), (3, vector(0.9, 0.1, 0, 0))],
        )
        nearest = await db.fetchall(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 2 ORDER BY distance", (vector(1, 0, 0, 0),)
        )
        await db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    assert (db.driver in VEC_DRIVERS, db.vec_version, nearest) == (
        True,
        f"v{sqlite_vec.__version__}",
        [(1,), (3,)],
    )


async def test_errors_from_a_foreign_driver_are_standard_library_exceptions(
    db_path: Path, stdlib_cannot_load_extensions: None
) -> None:
    async with Database.open(db_path, [EVENTS], load_vec=True) as db:
        await db.execute("INSERT INTO events(id, body) VALUES (1, 'a')")
        with pytest.raises(sqlite3.IntegrityError) as caught:
            await db.execute("INSERT INTO events(id, body) VALUES (1, 'b')")
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await db.fetchall("SELECT * FROM nowhere")
    cause = caught.value.__cause__
    assert isinstance(cause, sqlean.IntegrityError)
    assert (db.driver, caught.value.args, caught.value.sqlite_errorcode, caught.value.sqlite_errorname) == (
        "sqlean",
        cause.args,
        cause.sqlite_errorcode,
        cause.sqlite_errorname,
    )


def test_foreign_error_without_a_standard_counterpart_becomes_database_error() -> None:
    class StrangeError(Exception):
        pass

    translated = as_stdlib_error(StrangeError("odd"))
    assert (type(translated), translated.args) == (sqlite3.DatabaseError, ("odd",))


def test_standard_library_is_preferred_when_it_can_load_extensions(monkeypatch: pytest.MonkeyPatch) -> None:
    # sqlean stands in for a standard library built with extension loading.
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "sqlite3", sqlean)
        driver = sqlite_driver_for_vec()
    assert driver == "sqlite3"


def test_sqlean_is_used_when_the_standard_library_cannot_load_extensions(
    stdlib_cannot_load_extensions: None,
) -> None:
    assert sqlite_driver_for_vec() == "sqlean"


async def test_pysqlite3_is_the_last_resort(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, stdlib_cannot_load_extensions: None
) -> None:
    monkeypatch.setitem(sys.modules, "sqlean", None)
    monkeypatch.setitem(sys.modules, "pysqlite3", sqlean)
    async with Database.open(db_path, load_vec=True) as db:
        pass
    assert (db.driver, db.vec_version) == ("pysqlite3", f"v{sqlite_vec.__version__}")


async def test_no_driver_for_vec_names_what_was_tried_and_the_fix(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, stdlib_cannot_load_extensions: None
) -> None:
    monkeypatch.setitem(sys.modules, "sqlean", None)
    monkeypatch.setitem(sys.modules, "pysqlite3", None)
    with pytest.raises(DatabaseError) as caught:
        async with Database.open(db_path, load_vec=True):
            pass
    assert str(caught.value) == (
        f"{db_path}: cannot load sqlite-vec (tried sqlite3 (built without extension loading), "
        f"sqlean (not installed), pysqlite3 (not installed)). Fix: {VEC_FIX}"
    )


def test_driver_that_fails_to_load_the_extension_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdlib_cannot_load_extensions: None
) -> None:
    not_a_library = tmp_path / "vec0.so"
    not_a_library.write_text("not an ELF file")
    monkeypatch.setattr(_drivers, "vec_extension", lambda: str(not_a_library.with_suffix("")))
    monkeypatch.setitem(sys.modules, "pysqlite3", None)
    with pytest.raises(DatabaseError) as caught:
        sqlite_driver_for_vec()
    tried, _, fix = str(caught.value).partition(")). Fix: ")
    assert tried.startswith(
        "sqlite-vec: cannot load sqlite-vec (tried sqlite3 (built without extension loading), "
        f"sqlean ({not_a_library}"
    )
    assert tried.endswith("pysqlite3 (not installed")
    assert fix == VEC_FIX


def test_opening_a_database_with_sqlite_vec_does_not_import_its_package() -> None:
    """The package imports numpy when it can; a server opening its database must not pay for that."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from shared.db._drivers import sqlite_driver_for_vec; sqlite_driver_for_vec(); "
            "print(sorted(m for m in ('sqlite_vec', 'numpy') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "[]\n", "")


def test_missing_sqlite_vec_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    with pytest.raises(DatabaseError) as caught:
        sqlite_driver_for_vec()
    assert str(caught.value) == (
        "sqlite-vec: the sqlite-vec package is not installed. Fix: pip install sqlite-vec"
    )
