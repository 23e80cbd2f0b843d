"""The audit server's SQLite schema, as named migrations.

The ledger refuses UPDATE always and DELETE unless retention has flagged its own transaction. An
attacker with the file can drop these triggers, so they are no protection against tampering (the
hash chain is what detects that); they stop accidents, such as an operator's stray ``DELETE`` in
an ``sqlite3`` shell, before they happen.
"""

from __future__ import annotations

from shared.db import Migration

LEDGER = Migration.sql(
    "audit_0001_ledger",
    """
    CREATE TABLE ledger (
        seq INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        kind TEXT NOT NULL,
        source TEXT NOT NULL,
        agent TEXT NOT NULL,
        goal_id TEXT,
        subject TEXT NOT NULL,
        body TEXT NOT NULL,
        turn_index INTEGER,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE UNIQUE INDEX ledger_turn ON ledger(goal_id, turn_index) WHERE kind = 'turn';
    CREATE INDEX ledger_goal ON ledger(goal_id, kind, seq) WHERE goal_id IS NOT NULL;

    CREATE TABLE removed_ranges (
        first_seq INTEGER PRIMARY KEY,
        last_seq INTEGER NOT NULL,
        prev_hash TEXT NOT NULL,
        last_hash TEXT NOT NULL
    );

    CREATE TABLE retention_running (id INTEGER PRIMARY KEY CHECK (id = 1));

    CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger BEGIN
        SELECT RAISE(ABORT, 'the audit ledger is append-only');
    END;
    CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
    WHEN NOT EXISTS (SELECT 1 FROM retention_running) BEGIN
        SELECT RAISE(ABORT, 'the audit ledger is append-only; entries leave only through retention');
    END;

    CREATE VIRTUAL TABLE ledger_fts USING fts5(subject, body, content='ledger', content_rowid='seq');
    CREATE TRIGGER ledger_fts_insert AFTER INSERT ON ledger BEGIN
        INSERT INTO ledger_fts(rowid, subject, body) VALUES (new.seq, new.subject, new.body);
    END;
    CREATE TRIGGER ledger_fts_delete AFTER DELETE ON ledger BEGIN
        INSERT INTO ledger_fts(ledger_fts, rowid, subject, body)
        VALUES ('delete', old.seq, old.subject, old.body);
    END;
    """,
)

GOALS = Migration.sql(
    "audit_0002_goals",
    """
    CREATE TABLE goals (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        origin TEXT NOT NULL,
        prompt TEXT NOT NULL,
        phase TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT,
        last_decision TEXT NOT NULL DEFAULT '',
        last_event TEXT NOT NULL DEFAULT '',
        budget TEXT NOT NULL,
        outcome TEXT NOT NULL DEFAULT '',
        notified INTEGER NOT NULL DEFAULT 0,
        queue_pos INTEGER
    );
    CREATE INDEX goals_status ON goals(status, queue_pos);
    """,
)

LEDGER_AT = Migration.sql(
    "audit_0003_ledger_at",
    """
    -- Reading the ledger by time (the away digest covers a whole absence) without a full scan.
    CREATE INDEX ledger_at ON ledger(at);
    """,
)

MIGRATIONS: tuple[Migration, ...] = (LEDGER, GOALS, LEDGER_AT)
