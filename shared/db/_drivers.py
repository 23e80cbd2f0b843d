"""Which SQLite driver to use: the standard library, or one that can load sqlite-vec."""

from __future__ import annotations

import importlib
import importlib.util
import sqlite3
from pathlib import Path
from typing import Any

from shared.db._errors import problem

# Tried in this order: the standard library needs no extra package, the others ship their own SQLite.
VEC_DRIVERS: tuple[str, ...] = ("sqlite3", "sqlean", "pysqlite3")
_VEC_FIX = "pip install sqlean.py (it bundles an SQLite that can load extensions)"


def as_stdlib_error(exc: Exception) -> sqlite3.Error:
    """The standard library exception matching a foreign driver's one (same class name)."""
    cls = getattr(sqlite3, type(exc).__name__, None)
    if not (isinstance(cls, type) and issubclass(cls, sqlite3.Error)):
        cls = sqlite3.DatabaseError
    translated = cls(*exc.args)
    for attribute in ("sqlite_errorcode", "sqlite_errorname"):
        if hasattr(exc, attribute):
            setattr(translated, attribute, getattr(exc, attribute))
    return translated


def vec_extension() -> str | None:
    """The path of sqlite-vec's loadable extension (what ``sqlite_vec.loadable_path()`` gives), found
    without importing the package: it imports numpy when it can, about 11 MB that a process opening
    a database does not otherwise need. None when the package is not installed."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).parent / "vec0")


def connect_with_vec(
    target: str, where: object, timeout: float, *, any_thread: bool = False
) -> tuple[str, Any, Any]:
    """Open `target` with the first driver that loads sqlite-vec: (driver name, module, connection),
    usable from any thread when ``any_thread``."""
    extension = vec_extension()
    if extension is None:
        raise problem(where, "the sqlite-vec package is not installed", "pip install sqlite-vec")
    tried: list[str] = []
    for name in VEC_DRIVERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            tried.append(f"{name} (not installed)")
            continue
        if not hasattr(module.Connection, "enable_load_extension"):
            tried.append(f"{name} (built without extension loading)")
            continue
        conn = module.connect(target, isolation_level=None, timeout=timeout, check_same_thread=not any_thread)
        try:
            conn.enable_load_extension(True)
            conn.load_extension(extension)
            # Only sqlite-vec is trusted: SQL must not be able to load anything else later.
            conn.enable_load_extension(False)
        except module.Error as exc:
            conn.close()
            tried.append(f"{name} ({exc})")
            continue
        return name, module, conn
    raise problem(where, f"cannot load sqlite-vec (tried {', '.join(tried)})", _VEC_FIX)


def sqlite_driver_for_vec() -> str:
    """Name of the driver that loads sqlite-vec on this machine; DatabaseError when none does."""
    name, _, conn = connect_with_vec(":memory:", "sqlite-vec", timeout=0)
    conn.close()
    return name
