"""Where the state directory of a config is, found without validating the config.

The one-shot commands that talk to a running ``nexo run`` (``nexo chat``, ``nexo status``, ``nexo
agent run`` and friends) need only the state directory, which holds the daemon's sockets. Two ways
to it, both giving what the full load of the config would give:

- the running daemon's record (:class:`RunningRecord`): a small JSON file the daemon writes for its
  config file, so the command reads neither YAML nor the config's models. It names the state
  directory and what the config's ``state_dir`` depended on: the file's path and checksum, the
  environment variables the value refers to, ``HOME`` when it starts with ``~``, the working
  directory when it is relative. A command uses a record only when all of these are its own too, so
  an edited config, another environment or a second daemon on the same file with another
  ``NEXO_STATE_DIR`` never misleads it. The daemon holds an ``flock`` on its record while it runs;
  the kernel drops it however the daemon ends (SIGKILL included), so a record nobody holds is stale
  and ignored;
- else the config's ``state_dir`` key alone (:func:`read_state_dir`): the file (or the built-in
  defaults) and its ``${...}`` interpolation, by the same rules as the full load.

Records live in ``$XDG_RUNTIME_DIR/nexo/daemons`` (else ``${XDG_CACHE_HOME:-~/.cache}/nexo/daemons``):
a 0700 directory of 0600 files, each removed when its daemon stops cleanly.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import zlib
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the one-shot commands import this module first
    from collections.abc import Mapping
    from types import TracebackType
    from typing import Any

STATE_DIR_KEY = "state_dir"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024
BUILT_IN_FILE = Path(__file__).with_name("defaults.yaml")
"""The built-in defaults (``orchestrator.defaults``): a record keys them by this file like any config."""
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


class Located:
    """A state directory read from a config, what it depended on besides the config's bytes (None:
    it cannot be recorded), and those bytes."""

    __slots__ = ("inputs", "state_dir", "text")

    def __init__(self, state_dir: Path, inputs: dict[str, Any] | None, text: bytes) -> None:
        self.state_dir = state_dir
        self.inputs = inputs
        self.text = text


def config_of_label(label: str) -> Path | None:
    """The config file a daemon was started with, from the label it shows (``nexo status``)."""
    from orchestrator.defaults import BUILT_IN_LABEL

    return None if label == BUILT_IN_LABEL else Path(label)


def records_dir(env: Mapping[str, str]) -> Path:
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):  # the XDG rule: a relative value is ignored
        return Path(runtime, "nexo", "daemons")
    cache = env.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache.startswith("/") else Path("~/.cache").expanduser()
    return base / "nexo" / "daemons"


def read_state_dir(path: Path | None, env: Mapping[str, str]) -> Located | None:
    """The state directory by the full load's rules; None when the config needs the full load's
    error reporting (unreadable file, bad YAML, a reference that does not resolve, a non-text value)."""
    from orchestrator.defaults import BUILT_IN_LABEL, DEFAULT_STATE_DIR, default_config_text
    from shared.settings import ConfigError, interpolate, parse_yaml

    try:
        if path is None:
            file, text, base_dir = BUILT_IN_LABEL, default_config_text(), Path.cwd()
            content = text.encode()
        else:
            file, content, base_dir = str(path), path.read_bytes(), path.parent
            text = content.decode()
        data = parse_yaml(text, file)
        raw = data.get(STATE_DIR_KEY, str(DEFAULT_STATE_DIR))
        only = interpolate({STATE_DIR_KEY: raw}, env=env, base_dir=base_dir, file=file)
    except (OSError, UnicodeDecodeError, ConfigError):
        return None
    value = only[STATE_DIR_KEY]
    if not isinstance(value, str | Path) or not str(value):
        return None
    state = Path(value).expanduser()
    return Located(state, _inputs(raw, str(value), state, env), content)


def _inputs(raw: object, value: str, state: Path, env: Mapping[str, str]) -> dict[str, Any] | None:
    """What besides the file gave ``state``; None when that cannot be checked cheaply (a secret file,
    another user's ``~name``)."""
    if not isinstance(raw, str) or "${file:" in raw or (value.startswith("~") and not value.startswith("~/")):
        return None
    inputs: dict[str, Any] = {"env": {name: env.get(name) for name in sorted(set(_REFERENCE.findall(raw)))}}
    if value.startswith("~"):
        inputs["home"] = os.environ.get("HOME")
    if not state.is_absolute():
        inputs["cwd"] = str(Path.cwd())
    return inputs


def _inputs_hold(inputs: object, env: Mapping[str, str]) -> bool:
    if not isinstance(inputs, dict) or not isinstance(inputs.get("env"), dict):
        return False
    if any(env.get(name) != value for name, value in inputs["env"].items()):
        return False
    if "home" in inputs and os.environ.get("HOME") != inputs["home"]:
        return False
    return "cwd" not in inputs or str(Path.cwd()) == inputs["cwd"]


def _checksum(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def _config_file(path: Path | None) -> Path:
    return (BUILT_IN_FILE if path is None else path).resolve()


def _record_name(config_file: Path, state_dir: Path) -> str:
    return f"{_checksum(str(config_file).encode())}-{_checksum(str(state_dir).encode())}.json"


def find_running(path: Path | None, env: Mapping[str, str]) -> Path | None:
    """The state directory a running daemon recorded for this config (None: no usable record)."""
    try:
        config_file = _config_file(path)
        directory = records_dir(env)
        prefix = f"{_checksum(str(config_file).encode())}-"
        records = sorted(entry for entry in directory.iterdir() if entry.name.startswith(prefix))
        if not records:
            return None
        checksum = _checksum(config_file.read_bytes())
    except OSError:
        return None
    for entry in records:
        record = _live_record(entry)
        if (
            record is not None
            and record.get("version") == RECORD_VERSION
            and record.get("config") == str(config_file)
            and record.get("checksum") == checksum
            and isinstance(record.get("state_dir"), str)
            and _inputs_hold(record.get("inputs"), env)
        ):
            return Path(record["state_dir"])
    return None


def _live_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` if this user wrote it and its daemon still holds it."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: its daemon runs
        else:
            return None  # nobody holds it: its daemon is gone
        data = json.loads(os.read(descriptor, MAX_RECORD_BYTES))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)


class RunningRecord:
    """Held by the daemon while it runs: the record of its state directory for its config file.

    Best effort: a record that cannot be written (no writable records directory, a config whose
    ``state_dir`` cannot be checked cheaply) only means the commands read the config instead.
    """

    def __init__(self, config: Path | None, state_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.state_dir = state_dir
        self.env = os.environ if env is None else env
        self.path: Path | None = None
        self.problem: str | None = None
        """Why no record was written, when one could not be."""
        self._descriptor: int | None = None

    def __enter__(self) -> RunningRecord:
        located = read_state_dir(self.config, self.env)
        if located is None or located.inputs is None:
            self.problem = "its state_dir cannot be checked without the full load"
            return self
        if located.state_dir.absolute() != self.state_dir.absolute():
            self.problem = "the config file changed since it was loaded"
            return self
        try:
            self._write(located)
        except OSError as exc:
            self.problem = f"{exc.strerror or exc} ({exc.filename or records_dir(self.env)})"
        return self

    def _write(self, located: Located) -> None:
        from shared.private import make_private_dirs

        config_file = _config_file(self.config)
        directory = records_dir(self.env)
        make_private_dirs(directory)
        _sweep_stale(directory)
        body = {
            "version": RECORD_VERSION,
            "config": str(config_file),
            "checksum": _checksum(located.text),
            "state_dir": str(located.state_dir),
            "inputs": located.inputs,
            "pid": os.getpid(),
        }
        final = directory / _record_name(config_file, located.state_dir)
        temporary = directory / f".{final.name}.{os.getpid()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(descriptor, 0o600)  # the umask may have taken more
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            os.write(descriptor, json.dumps(body).encode())
            temporary.replace(final)
        except OSError:
            os.close(descriptor)
            temporary.unlink(missing_ok=True)
            raise
        self._descriptor, self.path = descriptor, final

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._descriptor is None or self.path is None:
            return
        try:
            if self.path.stat().st_ino == os.fstat(self._descriptor).st_ino:
                self.path.unlink()
        except OSError:
            pass  # already gone
        os.close(self._descriptor)
        self._descriptor = None


def _sweep_stale(directory: Path) -> None:
    """Remove the records no daemon holds (left by one that was killed). Racing another daemon's
    write can at worst remove a fresh record, which only sends its commands to the config."""
    for entry in directory.iterdir():
        if entry.name.startswith(".") or entry.suffix != ".json":
            continue
        try:
            descriptor = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            entry.unlink()
        except OSError:
            pass  # held by a running daemon, or gone already
        finally:
            os.close(descriptor)
