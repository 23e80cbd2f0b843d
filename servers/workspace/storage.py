"""Writing into the workspace when its disk may be full: a refusal naming the workspace, not a crash."""

from __future__ import annotations

from servers.workspace.paths import Confinement, Located
from shared.db import StorageCondition, is_storage_full


def write_or_refuse(files: Confinement, storage: StorageCondition, located: Located, data: bytes) -> bool:
    """`Confinement.write_atomic`, with ENOSPC / EDQUOT raised as `StorageFull` and remembered.

    The temp file is removed on failure, so the file keeps its previous content.
    """
    try:
        created = files.write_atomic(located, data)
    except OSError as exc:
        if is_storage_full(exc):
            raise storage.refused(exc) from exc
        raise
    storage.stored()
    return created
