"""Processes and files behind the results store: who holds a lock, what a killed writer left.

A run's lock (:func:`hacn_core.engine.results.run_lock`) names its owner by host, pid and
the process's start time (:func:`process_start_time`), so that a pid reused after a
restart is not taken for the owner (:func:`lock_holder_alive`). Another host's processes
cannot be seen from here: its lock holds a lease that the owner renews by touching the
file (:func:`heartbeat`), and an untouched lock is stale once the lease has run out. A file written
atomically goes through a temporary file named after its writer (:func:`temporary_name`);
one a killed writer left is removed by the next write (:func:`remove_stale_temporaries`).
Also the small text helpers of the store's one-line messages.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import re
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def plain_text(text: str) -> str:
    """``text`` without terminal escape codes (colours a library put into its message)."""
    return _ANSI.sub("", text)


def shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters with the count of the rest (a value echoed in a message)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    except (OverflowError, ValueError):  # not a pid at all
        return False
    return True


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch, 0.01 s resolution); None when unknown.

    Linux: ``/proc/<pid>/stat`` field 22 (clock ticks after boot) plus the boot time
    (``btime`` of ``/proc/stat``); elsewhere psutil's ``create_time`` where installed.
    A lock records its owner's start time, so that a pid reused by another process (after a
    restart, pids start again from 1) is not taken for the owner.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # fields after "(comm)": 3 is state, 22 starttime
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, StopIteration, IndexError):
        pass
    try:
        import psutil

        return round(psutil.Process(pid).create_time(), 2)
    except Exception:  # noqa: BLE001 - not installed, no such process, no permission
        return None


LOCK_HEARTBEAT_S = 60.0  # how often an owner touches its lock while it trains
LOCK_LEASE_S = 900.0  # another host's lock untouched for this long is stale (that host died, or lost the store)


def lock_owner(lock: Path) -> dict[str, Any] | None:
    """The lock's record (``host``, ``pid``, ``since``, ``started``, ``lease_s``) and when it was last
    touched (``touched``: its modification time), or None when it cannot be read (a writer died mid-write)."""
    try:
        owner = json.loads(lock.read_text())
        owner["pid"], owner["host"] = int(owner["pid"]), str(owner["host"])
        owner["touched"] = lock.stat().st_mtime
        return owner
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lock_holder_alive(owner: Mapping[str, Any] | None) -> bool:
    """Whether the process a lock record names still holds it.

    Another host's lock is held while its lease lasts: touched (:func:`heartbeat`) less than
    ``lease_s`` ago (a lock written before locks had leases counts as held). On this
    host the pid must be alive *and* be the same process: its start time must be the one
    recorded (``started``), or, in a lock written before locks recorded it, no later than
    the lock itself (``since``). A reused pid is therefore a stale lock.
    """
    if owner is None:
        return False
    pid = owner["pid"]
    if owner["host"] != platform.node():
        if owner.get("lease_s") is None:
            return True
        try:
            return time.time() - float(owner["touched"]) < float(owner["lease_s"])
        except (KeyError, TypeError, ValueError):
            return False
    if pid <= 0 or not pid_alive(pid):
        return False
    actual = process_start_time(pid)
    if actual is None:
        return True  # cannot tell: the pid is alive
    if owner.get("started") is not None:
        try:
            return abs(float(owner["started"]) - actual) < 1.0
        except (TypeError, ValueError):
            return False
    since = _parse_time(owner.get("since"))
    return since is None or actual <= since.timestamp() + 1.0


@contextlib.contextmanager
def heartbeat(path: Path, every: float) -> Iterator[None]:
    """Touch ``path`` every ``every`` seconds while the block runs (a lock's lease, renewed by a daemon thread)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            with contextlib.suppress(OSError):
                os.utime(path)

    thread = threading.Thread(target=beat, name=f"heartbeat {path.name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _parse_time(text: Any) -> _dt.datetime | None:
    try:
        when = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


def lock_age(owner: Mapping[str, Any], now: _dt.datetime | None = None) -> str:
    """How long ago a lock was taken, e.g. ``"lock taken 12 min ago"`` (``"lock age unknown"``)."""
    since = _parse_time(owner.get("since"))
    if since is None:
        return "lock age unknown"
    seconds = max(((now or _dt.datetime.now(_dt.timezone.utc)) - since).total_seconds(), 0.0)
    return f"lock taken {_age(seconds)} ago"


def _age(seconds: float) -> str:
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 172800 else f"{seconds / 86400:.1f} days"


def current_umask() -> int:
    """The process's umask (``/proc/self/status`` on Linux; elsewhere set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_name(path: Path) -> str:
    """The prefix of a temporary file that becomes ``path``: ``.<name>.tmp-<host>-<pid>-`` (the writer named,
    so that :func:`remove_stale_temporaries` can tell a dead writer's file from a live one's)."""
    return f".{path.name}.tmp-{platform.node()}-{os.getpid()}-"


#: a temporary file's name as :func:`temporary_name` writes it (the writer's host and pid in groups)
TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<host>.*)-(?P<pid>\d+)-[^-]*$")


def remove_stale_temporaries(folder: Path, name: str | None = None) -> int:
    """Remove the temporary files in ``folder`` (of target ``name``, or all) that a writer on this host left
    when it was killed mid-write (:func:`temporary_name`; its pid gone); return the bytes freed."""
    freed = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    for path in entries:
        match = TEMPORARY_NAME.match(path.name)
        if match is None or (name is not None and match["name"] != name) or match["host"] != platform.node():
            continue
        if int(match["pid"]) == os.getpid() or pid_alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            path.unlink()
            freed += size
    return freed
