"""The memories table's schema: the table, its full-text index and the triggers that keep them in step.

The full-text index is an external-content FTS5 table (it holds no copy of the text) over a
memory's content and tags, tokenized by ``unicode61 remove_diacritics 2`` (the splitting
``servers.memory.terms`` follows for its per-word counts). Triggers on the table write the index's
entries, so an insert, a delete or an edit of a memory's text changes its entry in the same
statement. ``memory_meta`` holds the store's own keys (``MemoryStore.meta``). The per-word counts
beside the index are ``servers.memory.terms``'s migration, run after these.
"""

from __future__ import annotations

from servers.memory.terms import TERM_MIGRATIONS
from shared.db import Migration

MEMORY_MIGRATIONS: tuple[Migration, ...] = (
    Migration.sql(
        "memory_0001_memories",
        """
        CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent TEXT NOT NULL,
            content TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            kind TEXT NOT NULL,
            provenance TEXT NOT NULL,
            importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
            created_at REAL NOT NULL,
            last_accessed_at REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            archived INTEGER NOT NULL DEFAULT 0,
            promoted_at REAL,
            UNIQUE (agent, content_sha256)
        );
        CREATE INDEX memories_by_agent ON memories (agent, archived, id);
        CREATE VIRTUAL TABLE memories_fts USING fts5 (
            content, tags, content = 'memories', content_rowid = 'id',
            tokenize = 'unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
        END;
        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, tags)
                VALUES ('delete', old.id, old.content, old.tags);
        END;
        CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, tags)
                VALUES ('delete', old.id, old.content, old.tags);
            INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
        END;
        """,
    ),
    *TERM_MIGRATIONS,
)
