"""The results store: one JSON file per run, and ``run_or_load``.

Every number the book shows comes from a file here. A run is identified by its
experiment id and the hash of its full configuration (seed included); the file
``<store>/<experiment>/<config_hash>.json`` holds the configuration, the hash,
the seed, the final metrics, the per-epoch curves, a checksum of both and the
provenance: code version (git commit and whether the tree was dirty), device,
torch threads, world size, library versions, wall time, date and profile.

``run_or_load`` is the entry point of every experiment: a stored result whose
hash matches is returned as it is; otherwise the experiment trains, the result
is written atomically (temporary file, then rename) and returned. A corrupted,
edited or mismatching file raises; it is never silently overwritten.

How a run executes is part of what makes its numbers (floating-point sums are
ordered by the thread count and by the ranks), so it is part of the hash:

* every run pins torch's CPU thread count (``threads``: default 1, or
  ``$HACN_THREADS``, or ``--threads``) and restores the previous count after it;
  a run with ``threads != 1`` is filed under ``config | {"threads": n}``.
  The same holds on a GPU: which device a study trains on is decided inside its
  train function, after the hash is fixed, and its CPU-side work (data, some
  measurements) still runs on those threads; the default 1 costs a GPU run nothing.
* under ``torchrun`` (``WORLD_SIZE > 1``) the ranks train one model together
  through :func:`hacn_core.engine.training.fit`, rank 0 alone writes checkpoints
  and the result, every rank returns rank 0's result, and the run is filed under
  ``config | {"world_size": n}``, plus ``{"backend": "nccl"}`` when the ranks talk
  through NCCL (CUDA) rather than gloo;
* ``$HACN_PRECISION`` (it replaces a study's precision: bf16 or fp16 autocast) files
  a run under ``config | {"run_precision": p}``; ``fp32``, what every study computes
  in on the CPU, adds nothing.

The defaults add nothing, so the single-process one-thread fp32 runs keep their hashes
(the provenance of every committed result says ``1 torch threads``).
:func:`study_config` strips these keys again. What the provenance records beyond
them (the device, library versions, commit, wall time) describes a run without
naming another one: a run resumed on another machine is the same run.

Before training, ``run_or_load`` checks that the result's folder and the
checkpoint folder are writable and have room for a checkpoint
(:func:`check_can_store`). If writing the final result fails anyway, the trained
result is kept as ``pending.json`` in the checkpoint folder and the next
``run_or_load`` of the same configuration stores it without training.

The store lives in ``results/`` of the repository unless ``$HACN_RESULTS`` names
another folder (tests and nbval point it at a temporary one); it is found from the
package's own location, not the working directory (:func:`results_root`). Smoke runs never
go there: without ``$HACN_RESULTS`` or an explicit store they use
``<tmp>/hacn-smoke-results`` (:func:`default_store`), and a smoke run pointed at
the committed ``results/`` is refused.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import json
import marshal
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hacn_core.engine import processes
from hacn_core.engine.processes import (
    TEMPORARY_NAME,
    current_umask,
    lock_age,
    lock_holder_alive,
    lock_owner,
    plain_text,  # noqa: F401 - the command line's messages use it from here
    process_start_time,
    remove_stale_temporaries,
    shorten,
    temporary_name,
)

RESULTS_ENV = "HACN_RESULTS"
ALLOW_TRAIN_ENV = "HACN_ALLOW_TRAIN"
THREADS_ENV = "HACN_THREADS"
DEFAULT_THREADS = 1  # the book's CPU experiments: one torch thread, bit for bit on any machine
PRECISION_ENV = "HACN_PRECISION"  # read here for the hash; hacn_core.engine.training applies it
# added to the filed configuration when not default (Execution.hashed)
EXECUTION_KEYS: tuple[str, ...] = ("threads", "world_size", "backend", "run_precision")
SCHEMA_VERSION = 1
REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED_STORE = REPO_ROOT / "results"
SMOKE_STORE = Path(tempfile.gettempdir()) / "hacn-smoke-results"
PENDING_NAME = "pending.json"
CHECKPOINT_ESTIMATE_BYTES = 16 * 2**20  # room asked for a checkpoint when none of the experiment exists yet
RESULT_ESTIMATE_BYTES = 2**20
_RESULT_NAME = re.compile(r"[0-9a-f]{16}\.json")
# (resolved path, BLAKE2 digest of the file's bytes, checksum checked) of every result file this process has
# read and checked: ResultsStore.read skips the hash and checksum checks for bytes it has checked already.
_VERIFIED_READS: set[tuple[str, bytes, bool]] = set()
_VERIFIED_READS_MAX = 200_000
# The parsed JSON of every result file this process has read, by the BLAKE2 digest of its bytes: bytes read
# again (the ledger reads a thousand files, a third of them twice) are not parsed again. Keyed on the content,
# not on the file's name or mtime, so an edited file is always parsed (and checked) afresh. Kept as marshal
# bytes, about 5x faster to load than the JSON, so that every read gets objects of its own: a caller that
# changes a result's dicts changes only its own copy. The whole committed store takes about 45 MB.
_PARSED: dict[bytes, bytes] = {}
_PARSED_MAX_BYTES = 256 * 2**20
_parsed_bytes = 0  # the size of the marshal bytes in _PARSED


class ResultError(RuntimeError):
    """Base class of the store's errors."""


class ResultsRootError(ResultError, FileNotFoundError):
    """No results folder to read: ``$HACN_RESULTS`` unset and no ``results/`` beside the package."""


class CorruptResultError(ResultError):
    """A stored file cannot be read or is missing fields."""


class UnreadableResultError(ResultError, PermissionError):
    """A stored file this user may not read (another user's, written without read permission)."""


class ResultMismatchError(ResultError):
    """A stored file does not belong to the configuration it is filed under."""


class MissingResultError(ResultError):
    """No stored result, and training is not allowed here (e.g. during a book build)."""


class StoreNotWritableError(ResultError):
    """A results or checkpoint folder cannot take the run's files (read-only, not a folder, full)."""


class PendingResultError(ResultError):
    """Training finished but its result could not be stored; it is kept in ``pending``."""

    def __init__(self, message: str, pending: Path | None, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.pending = pending
        self.result = result


class DistributedRunError(ResultError):
    """A run launched by torchrun that cannot be trained by its ranks together."""


class ExecutionError(ResultError, ValueError):
    """A bad setting of how runs execute (``--threads``, ``$HACN_THREADS``, ``$HACN_PRECISION``)."""


class RunInProgressError(ResultError):
    """Another live process is training this configuration now (its lock file names it)."""

    def __init__(self, message: str, lock: Path) -> None:
        super().__init__(message)
        self.lock = lock


class PausedElsewhereError(ResultError):
    """The configuration has a paused run (a checkpoint) filed under another execution (other
    ``--threads``, ``$HACN_PRECISION``, ranks): starting over under this one would leave it behind.
    The message says how to resume it, or how to move it aside."""


LOCK_NAME = "run.lock"
SKIPPED_EXIT_CODE = 75  # `run` when a configuration was skipped (EX_TEMPFAIL: another process holds it)
@contextlib.contextmanager
def run_lock(folder: Path, what: str) -> Iterator[Path]:
    """Hold ``folder/run.lock`` while one process trains ``what``; a second process gets
    :class:`RunInProgressError` instead of training the same configuration twice.

    The lock is created with ``O_EXCL`` (atomic on a local file system) and holds
    the owner's host, pid and process start time (:func:`process_start_time`). A
    lock left by a process that died (same host, pid gone, e.g. after ``kill -9`` or
    a power cut), or whose pid now belongs to another process (a restart reuses
    pids), is stale and taken over (:func:`lock_holder_alive`); so is another host's
    lock whose lease ran out (the owner touches it every ``LOCK_HEARTBEAT_S``, 60 s;
    the lease is ``LOCK_LEASE_S``, 15 min). The checkpoints beside it are where the
    new owner resumes from. Released on exit, also when training raises or is
    interrupted.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    me = {"host": platform.node(), "pid": os.getpid(), "since": _dt.datetime.now(_dt.timezone.utc).isoformat(
        timespec="seconds"), "started": process_start_time(os.getpid()), "lease_s": processes.LOCK_LEASE_S}
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = lock_owner(lock)
            if lock_holder_alive(owner):
                assert owner is not None
                raise RunInProgressError(
                    f"{what} is being trained by pid {owner['pid']} on {owner['host']} since "
                    f"{owner.get('since', '?')} ({lock_age(owner)}; lock {lock}); wait for it, or stop that "
                    "process. A lock whose process is gone is taken over automatically.", lock) from None
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(me))
        break
    else:  # pragma: no cover - three races lost in a row
        raise RunInProgressError(f"{what}: could not take the lock {lock}", lock)
    try:
        with processes.heartbeat(lock, processes.LOCK_HEARTBEAT_S):
            yield lock
    finally:
        with contextlib.suppress(FileNotFoundError, OSError):
            if json.loads(lock.read_text()).get("pid") == me["pid"]:
                lock.unlink()


def _canonical(value: Any) -> Any:
    """JSON-ready form of a configuration value (tuples become lists, keys strings)."""
    # The plain types first, by exact type: the answer is the same as below, but isinstance against the
    # Mapping ABC is slow and a ledger hashes thousands of configurations (every read checks its file's).
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None or (kind is float and math.isfinite(value)):
        return value
    if kind is dict:
        return {str(k): _canonical(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"configuration value {value!r} is not finite; it cannot be hashed reproducibly")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"configuration value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def _plain(value: Any) -> Any:
    """Metrics and curves as plain JSON values (tensors and NumPy scalars become floats; NaN allowed)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # torch tensors, NumPy arrays and scalars
        return _plain(value.tolist())
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"result value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def config_hash(config: Mapping[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the canonical JSON of ``config``."""
    text = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def result_checksum(metrics: Mapping[str, Any], curves: Mapping[str, Any]) -> str:
    """``sha256:`` + the SHA-256 of the canonical JSON of ``{"curves": ..., "metrics": ...}``.

    Sorted keys, no spaces, NaN written as ``NaN``; a stored file re-reads to the
    same values, so the checksum of a loaded result is the one it was stored with
    unless someone edited its numbers.
    """
    text = json.dumps({"curves": curves, "metrics": metrics}, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- how a run executes


def requested_threads(threads: int | None = None, source: str = "threads") -> int:
    """``threads`` if given, else ``$HACN_THREADS``, else :data:`DEFAULT_THREADS`; a positive integer.

    A bad value raises :class:`ExecutionError` naming ``source`` (the argument, or the flag
    that gave it, e.g. ``--threads``) or the variable.
    """
    if threads is None:
        raw = os.environ.get(THREADS_ENV, "").strip()
        if not raw:
            return DEFAULT_THREADS
        source = f"${THREADS_ENV}"
        try:
            threads = int(raw)
        except ValueError:
            raise ExecutionError(f"{source}={shorten(raw)!r} is not an integer; allowed: a positive integer "
                                 "(default 1)") from None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ExecutionError(f"{source}={threads!r} is not allowed; allowed: a positive integer (default 1)")
    return threads


def requested_precision() -> str | None:
    """``$HACN_PRECISION`` (``auto``, ``fp32``, ``bf16``, ``fp16``), or None when unset; a bad value raises
    :class:`ExecutionError`. :func:`hacn_core.engine.training.run_precision` applies it to every fit."""
    raw = os.environ.get(PRECISION_ENV, "").strip()
    if not raw:
        return None
    from hacn_core.engine.config import PRECISIONS

    if raw not in PRECISIONS:
        raise ExecutionError(f"${PRECISION_ENV}={shorten(raw)!r} is invalid; allowed: {', '.join(PRECISIONS)}")
    return raw


def planned_backend(world_size: int) -> str | None:
    """The process-group backend :func:`hacn_core.engine.training.fit` will join under torchrun: NCCL
    where CUDA is available (a study on ``device="auto"``), gloo otherwise; None for one process."""
    if world_size <= 1:
        return None
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


@contextlib.contextmanager
def pinned_threads(threads: int) -> Iterator[int]:
    """Run the block with ``torch.set_num_threads(threads)``; restore the previous count after it."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(previous)


def current_threads() -> int:
    """torch's CPU thread count now."""
    import torch

    return torch.get_num_threads()


def launched_world() -> tuple[int, int]:
    """``(world size, rank)`` torchrun gave this process (``$WORLD_SIZE``, ``$RANK``); ``(1, 0)`` otherwise."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1), int(os.environ.get("RANK", "0") or 0)


@dataclass(frozen=True)
class Execution:
    """How a run executes: torch CPU threads, the ``$HACN_PRECISION`` override and, under torchrun,
    the ranks and their backend.

    ``backend`` (``gloo``/``nccl``) is planned from the machine (:func:`planned_backend`) and
    known once :func:`~hacn_core.engine.training.fit` joined the process group; ``None`` for a
    single process. ``precision`` is ``$HACN_PRECISION`` (None: each study's own).
    """

    threads: int = DEFAULT_THREADS
    world_size: int = 1
    rank: int = 0
    backend: str | None = None
    precision: str | None = None

    def hashed(self) -> dict[str, Any]:
        """The entries added to the filed configuration: only those that differ from the default
        (one thread, one process, gloo between ranks, each study's precision or fp32)."""
        extra: dict[str, Any] = {}
        if self.threads != DEFAULT_THREADS:
            extra["threads"] = self.threads
        if self.world_size > 1:
            extra["world_size"] = self.world_size
            if self.backend not in (None, "gloo"):
                extra["backend"] = self.backend
        if self.precision not in (None, "fp32"):
            extra["run_precision"] = self.precision
        return extra

    def flags(self) -> str:
        """How to start a run with this execution from the command line, e.g. ``--threads 2``
        (``HACN_PRECISION=bf16 ... --threads 2``; ``torchrun --nproc_per_node 2`` for ranks)."""
        parts = [f"--threads {self.threads}"]
        if self.precision is not None:
            parts.insert(0, f"HACN_PRECISION={self.precision}")
        if self.world_size > 1:
            parts.insert(0, f"torchrun --nproc_per_node {self.world_size}")
        return " ".join(parts)

    def provenance(self) -> dict[str, Any]:
        record: dict[str, Any] = {"threads": self.threads, "world_size": self.world_size}
        if self.world_size > 1:
            record["backend"] = self.backend
        return record


def planned_execution(threads: int | None = None) -> Execution:
    """The execution a run about to start will have: :func:`requested_threads`, ``$HACN_PRECISION``,
    torchrun's world and its backend (:func:`planned_backend`)."""
    world, rank = launched_world()
    return Execution(requested_threads(threads), world, rank, planned_backend(world), requested_precision())


def current_execution() -> Execution:
    """How this process runs now: torch's thread count and, under torchrun, the joined process group.

    Raises :class:`DistributedRunError` when torchrun started several ranks but no
    process group exists: the train function did not go through ``fit``, so every
    rank trained the configuration alone.
    """
    threads = current_threads()
    world, _ = launched_world()
    if world <= 1:
        return Execution(threads, precision=requested_precision())
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise DistributedRunError(
            f"torchrun started {world} processes, but the training function never joined a process group: it does "
            "not train through hacn_core.engine.training.fit, so each rank trained the run alone. Nothing was "
            "stored; run this experiment without torchrun."
        )
    return Execution(threads, dist.get_world_size(), dist.get_rank(), dist.get_backend(), requested_precision())


def filed_config(config: Mapping[str, Any], execution: Execution) -> dict[str, Any]:
    """The configuration a run is filed (and hashed) under: ``config`` plus ``execution.hashed()``."""
    clash = sorted(set(EXECUTION_KEYS) & set(config))
    if clash:
        raise ValueError(f"configuration keys {clash} are reserved for how a run executes; rename them")
    return dict(_canonical(config)) | execution.hashed()


def study_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A filed configuration without the execution entries: the configuration the study generated."""
    return {k: v for k, v in config.items() if k not in EXECUTION_KEYS}


_CHECKPOINT_FILE = "last.pt"  # hacn_core.engine.checkpoint.CHECKPOINT_NAME (that module imports torch)


def _other_executions() -> Iterator[Execution]:
    """The executions :func:`paused_elsewhere` tries: 1-128 threads, each precision override, one process or
    2, 4, 8 ranks (gloo or NCCL)."""
    worlds = [(1, None)] + [(w, b) for w in (2, 4, 8) for b in ("gloo", "nccl")]
    for world, backend in worlds:
        for precision in (None, "bf16", "fp16", "auto"):
            for threads in range(1, 129):
                yield Execution(threads, world, 0, backend, precision)


def paused_elsewhere(store: ResultsStore, experiment: str, config: Mapping[str, Any],
                     plan: Execution) -> list[tuple[Path, Execution]]:
    """The checkpoint folders of the study configuration ``config`` filed under another execution than
    ``plan`` (other threads, precision or ranks), each with that execution; ``[]`` when there are none.

    A run is filed under how it executes, so a run paused under ``--threads 2`` and started again
    under one thread would start over under another hash. ``run`` and ``status`` look here to say how
    to resume it instead. Only folders holding a checkpoint count.
    """
    root = store.root / ".checkpoints" / experiment
    own = config_hash(filed_config(config, plan))
    try:
        folders = {p.name: p for p in root.iterdir()
                   if p.name != own and p.is_dir() and (p / _CHECKPOINT_FILE).is_file()}
    except OSError:
        return []
    found = []
    base = filed_config(config, Execution())
    for execution in _other_executions() if folders else ():
        folder = folders.pop(config_hash(base | execution.hashed()), None)
        if folder is not None:
            found.append((folder, execution))
            if not folders:
                break
    return found


def paused_elsewhere_message(experiment: str, config: Mapping[str, Any], plan: Execution,
                             others: Sequence[tuple[Path, Execution]]) -> str:
    """What ``run`` says (and raises as :class:`PausedElsewhereError`) when :func:`paused_elsewhere` found runs."""
    folder, execution = others[0]
    aside = folder.with_name(folder.name + ".aside")
    return (f"{experiment} (config hash {config_hash(filed_config(config, plan))}, started with {plan.flags()}) has "
            f"a paused run under {execution.flags()} in {folder}: to resume it, run the same command with "
            f"{execution.flags()} (the threads, precision and ranks of a run are part of its identity); to start "
            f"over with {plan.flags()} instead, move it aside first: mv {folder} {aside}")


@dataclass
class RunResult:
    """One stored run."""

    experiment: str
    config: dict[str, Any]
    config_hash: str
    seed: int | None
    metrics: dict[str, float]
    curves: dict[str, list[Any]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    profile: str | None = None
    schema: int = SCHEMA_VERSION
    checksum: str | None = None  # result_checksum(metrics, curves); None in files stored before it existed

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True, allow_nan=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<memory>") -> RunResult:
        required = ("experiment", "config", "config_hash", "metrics")
        missing = [key for key in required if key not in data]
        if missing:
            raise CorruptResultError(f"{source}: missing fields {missing}; the file is not a hacn-book result")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """Git commit of the library and whether its tracked files had uncommitted changes.

    Read once per process, at the first run: the code a process runs is the code
    it imported when it started, whatever is committed while it trains. Outside a git
    checkout (or in a copy whose .git is not its own), ``$HACN_GIT_COMMIT`` names the commit the
    copy was made from.
    """
    if os.environ.get("HACN_GIT_COMMIT"):
        # a copy of the code whose .git is missing or not its own (an export, a remote machine's copy of a
        # working tree): the commit it was made from, as the caller says
        return {"git_commit": os.environ["HACN_GIT_COMMIT"], "git_dirty": None}
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "hacn_core")
    return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}


def device_description(device: str | None = None) -> str:
    """A human-readable name of the device a run used."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(torch.device(device))}"
    if str(device).startswith("mps"):
        return "mps: Apple GPU"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu} ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries a run depends on."""
    from importlib import metadata

    import torch

    versions = {"python": sys.version.split()[0], "torch_build": torch.__version__}  # e.g. 2.13.0+cu130
    for dist in ("torch", "torchvision", "torch-geometric", "numpy", "hacn-core"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def results_root() -> Path:
    """The folder of stored results when none is given, whatever the working directory.

    In order: ``$HACN_RESULTS`` if set; else ``results/`` of the repository checkout the package
    was imported from (``<checkout>/hacn_core/...`` next to ``<checkout>/results/``: what ``make env``
    and ``pip install -e .`` give, so a chapter notebook run from any folder finds the stored runs).
    A package installed without its checkout (``pip install .``, a wheel) has no ``results/`` beside
    it; that raises :class:`ResultsRootError` naming where it looked and how to fix it, rather than
    finding nothing and training every run again.
    """
    env = os.environ.get(RESULTS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    committed = REPO_ROOT / "results"
    if committed.is_dir():
        return committed
    package = Path(__file__).resolve().parents[1]
    raise ResultsRootError(
        f"no results folder: ${RESULTS_ENV} is not set and {committed} does not exist (hacn_core is "
        f"imported from {package}, which is not a checkout of the hacn-book repository: it was installed "
        "without one, e.g. by `pip install .`). Either install from a checkout with `make env` or "
        "`pip install -e <checkout>`, or point the variable at the stored results: "
        f"export {RESULTS_ENV}=/path/to/hacn-book/results"
    )


class ResultsStore:
    """A folder of results, one JSON file per run (default: :func:`results_root`)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else results_root()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.root)!r})"

    def path_for(self, experiment: str, config: Mapping[str, Any]) -> Path:
        return self.root / experiment / f"{config_hash(config)}.json"

    def read(self, path: str | os.PathLike[str], *, checksum: bool = True) -> RunResult:
        """Read one file, checking that it is intact, filed under its own hash and (``checksum``)
        that its metrics and curves match its checksum (:func:`verify_checksum`)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except PermissionError as err:  # intact, but not this user's to read: moving it aside is no fix
            raise UnreadableResultError(
                f"{path}: this user may not read it (permission denied; mode {_mode(path)}). Ask its owner to "
                f"make it readable (chmod a+r {path}) or read the store as that user.") from err
        digest = hashlib.blake2b(raw, digest_size=20).digest()
        data = _parse(raw, digest, path)
        if not isinstance(data, dict):
            raise CorruptResultError(f"{path}: expected a JSON object, found {type(data).__name__}")
        result = RunResult.from_dict(data, str(path))
        # The same bytes at the same path were checked before in this process (a chapter or the ledger
        # reads a file more than once): the checks below would give the same answer, so skip them.
        seen = (str(path.resolve()), digest, checksum)
        if seen in _VERIFIED_READS or (not checksum and seen[:2] + (True,) in _VERIFIED_READS):
            return result
        actual = config_hash(result.config)
        pending = path.name == PENDING_NAME or path.name.startswith("hacn-pending-")  # not filed: waiting
        if actual != result.config_hash or (path.stem != actual and not pending):
            raise ResultMismatchError(
                f"{path}: its configuration hashes to {actual}, but the file records {result.config_hash} "
                f"and is named {path.stem}. It was edited or misfiled; restore it from git or move it aside."
            )
        if path.parent.name != result.experiment and not pending:
            raise ResultMismatchError(
                f"{path}: records experiment {result.experiment!r} but is filed under {path.parent.name!r}"
            )
        if checksum:
            verify_checksum(result, path)
        if len(_VERIFIED_READS) < _VERIFIED_READS_MAX:
            _VERIFIED_READS.add(seen)
        return result

    def load(self, experiment: str, config: Mapping[str, Any]) -> RunResult | None:
        """The stored result of ``experiment`` at ``config``, or ``None`` if there is none."""
        path = self.path_for(experiment, config)
        if not path.exists():
            return None
        result = self.read(path)
        if _canonical(result.config) != _canonical(config):  # a hash collision or a hand-edited file
            raise ResultMismatchError(f"{path}: stored configuration differs from the requested one")
        return result

    def save(self, result: RunResult) -> Path:
        """Write ``result`` atomically; refuse to replace a different stored result."""
        if config_hash(result.config) != result.config_hash:
            raise ResultMismatchError(f"result of {result.experiment} carries a hash that does not match its config")
        path = self.path_for(result.experiment, result.config)
        if path.exists():
            self.read(path)  # raises if the existing file is corrupt: never overwrite it silently
            raise ResultError(f"{path} exists already; delete it first to rerun this configuration")
        write_atomic(path, result.to_json())
        return path

    def iter_results(self, experiment: str | None = None, *,
                     damaged: list[tuple[Path, str]] | None = None) -> Iterator[RunResult]:
        """Every stored result (of one experiment, if given), in file-name order.

        A result file is named ``<config hash>.json``; any other JSON in an
        experiment's folder (a user's ``summary.json``) is skipped with a warning
        naming it. A result file that is damaged (or another JSON named like one)
        raises; with a ``damaged`` list it is appended there as ``(path, message)``
        and skipped with a one-line warning instead, so that one bad file costs its
        own run, not everything read with it (the ledger).
        """
        if not self.root.is_dir():
            return
        folders = (
            [self.root / experiment]
            if experiment
            else sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        )
        for folder in folders:
            for path in sorted(folder.glob("*.json")):
                if not _RESULT_NAME.fullmatch(path.name):
                    warnings.warn(f"{path}: not a result file (results are named <16-hex config hash>.json); "
                                  "skipped", stacklevel=2)
                    continue
                if damaged is None:
                    yield self.read(path)
                    continue
                try:
                    result = self.read(path)
                except ResultError as err:
                    damaged.append((path, str(err)))
                    warnings.warn(f"skipped a damaged result: {err}", stacklevel=2)
                    continue
                yield result

    def checkpoint_dir(self, experiment: str, config: Mapping[str, Any]) -> Path:
        """Where an unfinished run keeps its checkpoints: ``<store>/.checkpoints/...``.

        Inside the store (so a temporary store gets temporary checkpoints) but in a
        hidden folder that git ignores; removed once the result is saved.
        """
        return self.root / ".checkpoints" / experiment / config_hash(config)

    def pending_path(self, experiment: str, config: Mapping[str, Any]) -> Path:
        """Where a trained result that could not be stored waits: ``pending.json`` beside the checkpoints."""
        return self.checkpoint_dir(experiment, config) / PENDING_NAME


def _parse(raw: bytes, digest: bytes, path: Path) -> Any:
    """The JSON value of a result file's bytes ``raw`` (``digest``: their BLAKE2 digest), as objects no other
    read shares; bytes parsed before in this process are copied from :data:`_PARSED`, not parsed again."""
    global _parsed_bytes
    kept = _PARSED.get(digest)
    if kept is not None:
        return marshal.loads(kept)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptResultError(
            f"{path}: cannot be read as a result ({type(err).__name__}: {err}). "
            "Move it aside (or restore it from git) and run the experiment again."
        ) from err
    if _parsed_bytes < _PARSED_MAX_BYTES:  # when full, files not kept yet are parsed at every read
        try:
            kept = marshal.dumps(data)  # before the caller gets ``data``: what it does to it stays its own
        except ValueError:  # nested deeper than marshal goes (json only under a raised recursion limit)
            return data
        _PARSED[digest] = kept
        _parsed_bytes += len(kept)
    return data


def default_store(profile: str | None = None) -> ResultsStore:
    """The store a run uses when none is given: ``$HACN_RESULTS``, else the committed ``results/``;
    for the smoke profile (without ``$HACN_RESULTS``) the temporary :data:`SMOKE_STORE` instead."""
    if not os.environ.get(RESULTS_ENV) and _is_smoke(profile):
        return ResultsStore(SMOKE_STORE)
    return ResultsStore()


def _is_smoke(profile: str | None) -> bool:
    return (profile or "").strip().lower() == "smoke"


_unchecked_warned = False


def verify_checksum(result: RunResult, path: str | os.PathLike[str]) -> None:
    """Raise :class:`CorruptResultError` naming ``path`` when the metrics or curves do not match the checksum.

    A file without a checksum (stored before checksums existed) passes, with one
    warning per process.
    """
    global _unchecked_warned
    if result.checksum is None:
        if not _unchecked_warned:
            _unchecked_warned = True
            warnings.warn(f"{path} has no checksum (and maybe other files): its numbers cannot be verified; "
                          "add checksums with: python tools/add_checksums.py", stacklevel=3)
        return
    actual = result_checksum(result.metrics, result.curves)
    if actual != result.checksum:
        raise CorruptResultError(
            f"{path}: its metrics or curves do not match the checksum stored with them ({result.checksum}, "
            f"now {actual}): the file was edited after it was stored. Restore it from git or move it aside "
            "and run the experiment again."
        )


def add_checksums(root: str | os.PathLike[str]) -> list[Path]:
    """Write the missing ``checksum`` into every result file under ``root``; return the files changed.

    Nothing else of a file changes: its JSON is read, the checksum added, and
    the text written back in the store's format (``RunResult.to_json``), which
    is checked first to reproduce the file's old text exactly without the
    checksum. A file that does not (hand-formatted) is left alone and reported.
    """
    changed = []
    for path in sorted(Path(root).glob("*/*.json")):
        if path.parent.name.startswith(".") or not _RESULT_NAME.fullmatch(path.name):
            continue
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        if data.get("checksum") is not None:
            continue
        ResultsStore(root).read(path, checksum=False)  # intact and filed under its own hash
        if _result_text(data) != text:
            raise ResultError(f"{path}: not in the store's format; add its checksum by hand or restore it from git")
        data["checksum"] = result_checksum(data["metrics"], data.get("curves", {}))
        write_atomic(path, _result_text(data))
        changed.append(path)
    return changed


def _result_text(data: Mapping[str, Any]) -> str:
    """A result's file text (the format of :meth:`RunResult.to_json`)."""
    return json.dumps(data, indent=1, sort_keys=True, allow_nan=True) + "\n"


def _mode(path: Path) -> str:
    try:
        return oct(path.stat().st_mode & 0o777)
    except OSError:
        return "unknown"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder, fsync and rename.

    The file gets the mode a plain ``open`` would give it (``0o666`` less the umask), so
    that the other users of a shared store (a book build run as another user) can read
    it; a temporary file left by a writer killed mid-write is removed first.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path), suffix="")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp creates 0o600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- before and after training


def checkpoint_estimate(store: ResultsStore, experiment: str) -> int:
    """Bytes to ask for a checkpoint of ``experiment``: twice its largest existing checkpoint in
    ``store`` (an atomic write holds the old and the new one), else :data:`CHECKPOINT_ESTIMATE_BYTES`.
    A checkpoint's temporary file (``.last.pt.tmp-...``, a full-size copy while it is written) counts as one."""
    folder = store.root / ".checkpoints" / experiment
    sizes = []
    for path in folder.glob("*/*") if folder.is_dir() else ():
        if path.suffix == ".pt" or (TEMPORARY_NAME.match(path.name) and ".pt.tmp-" in path.name):
            with contextlib.suppress(OSError):
                sizes.append(path.stat().st_size)
    return 2 * max(sizes) if sizes else CHECKPOINT_ESTIMATE_BYTES


def check_folder(folder: str | os.PathLike[str], need_bytes: int, what: str) -> None:
    """Raise :class:`StoreNotWritableError` naming ``folder`` unless it can be created, written and has
    ``need_bytes`` free.

    Writes and removes a probe file (``os.access`` is no test: root passes it on a
    read-only mount); the folders it had to create for that are removed again.
    """
    folder = Path(folder)
    created = [p for p in (folder, *folder.parents) if not p.exists() and not p.is_symlink()]
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
            os.close(fd)
            os.unlink(probe)
            free = shutil.disk_usage(folder).free
        finally:
            for path in created:  # deepest first
                with contextlib.suppress(OSError):
                    path.rmdir()
    except OSError as err:
        raise StoreNotWritableError(
            f"the {what} {folder} is not writable ({type(err).__name__}: {err.strerror or err}); nothing was "
            "trained. Make it writable or choose another store (--results DIR or $HACN_RESULTS)."
        ) from err
    if free < need_bytes:
        raise StoreNotWritableError(
            f"the {what} {folder} has {free / 2**20:.1f} MiB free, and this run needs about "
            f"{need_bytes / 2**20:.1f} MiB there; nothing was trained. Free space or choose another store "
            "(--results DIR or $HACN_RESULTS)."
        )


def check_can_store(store: ResultsStore, experiment: str, config: Mapping[str, Any], profile: str | None) -> None:
    """Before training: the run's result folder and checkpoint folder take files and have room.

    Also refuses a smoke run aimed at the committed ``results/`` (smoke numbers are
    no book results). ``config`` is the filed configuration.
    """
    if _is_smoke(profile) and store.root.resolve() == COMMITTED_STORE.resolve():
        raise ResultError(
            f"smoke runs are never stored in the committed {COMMITTED_STORE}; give another store "
            f"(--results DIR or ${RESULTS_ENV}), or none to use {SMOKE_STORE}"
        )
    remove_stale_temporaries(store.root / experiment)  # a result write killed midway: its file is no result
    checkpoints = store.checkpoint_dir(experiment, config)
    remove_stale_temporaries(checkpoints)  # a checkpoint write killed midway: room for this one
    check_folder(store.root / experiment, RESULT_ESTIMATE_BYTES, "results folder")
    check_folder(checkpoints, checkpoint_estimate(store, experiment), "checkpoint folder")


def stored_or_pending(store: ResultsStore, experiment: str, config: Mapping[str, Any], *,
                      rank: int = 0) -> RunResult | None:
    """The stored result of ``config`` (filed configuration), else its pending one, stored now; else ``None``.

    A pending result is one whose training finished but whose file could not be
    written (:class:`PendingResultError`); storing it needs no training. Under
    torchrun only rank 0 stores it (and writes the file before removing the
    pending one); the other ranks look at the pending file first, so every rank
    sees the same result.
    """
    pending = store.pending_path(experiment, config)
    spare = spare_pending_path(experiment, config)  # where it waits when the checkpoint folder took nothing
    if not pending.is_file() and spare.is_file():
        pending = spare
    if rank != 0:
        if pending.is_file():
            return _read_pending(store, pending, experiment, config)
        return store.load(experiment, config)
    found = store.load(experiment, config)
    if found is not None or not pending.is_file():
        if found is not None and spare.is_file():
            with contextlib.suppress(OSError, ResultError):  # a copy of what is stored now: debris
                if _read_pending(store, spare, experiment, config).checksum == found.checksum:
                    spare.unlink()
        return found
    result = _read_pending(store, pending, experiment, config)
    try:
        store.save(result)
    except OSError as err:
        raise PendingResultError(
            f"the trained result of {experiment} waiting in {pending} could still not be stored in "
            f"{store.path_for(experiment, config)} ({type(err).__name__}: {err}); fix that folder and rerun",
            pending,
        ) from err
    shutil.rmtree(store.checkpoint_dir(experiment, config), ignore_errors=True)  # the result supersedes them
    spare.unlink(missing_ok=True)
    return result


def spare_pending_path(experiment: str, config: Mapping[str, Any]) -> Path:
    """Where a trained result waits when neither its results folder nor its checkpoint folder took it:
    ``<tmp>/hacn-pending-<experiment>-<hash>.json`` (:func:`stored_or_pending` finds it there too)."""
    return Path(tempfile.gettempdir()) / f"hacn-pending-{experiment}-{config_hash(config)}.json"


def _read_pending(store: ResultsStore, pending: Path, experiment: str, config: Mapping[str, Any]) -> RunResult:
    result = store.read(pending)
    if result.experiment != experiment or _canonical(result.config) != _canonical(config):
        raise ResultMismatchError(f"{pending}: holds another run ({result.experiment}, {result.config_hash})")
    return result


def _save_or_keep_pending(store: ResultsStore, result: RunResult) -> RunResult:
    """``store.save(result)``; if the file system refuses, keep ``result`` as pending and raise saying where."""
    try:
        store.save(result)
        return result
    except OSError as err:
        target = store.path_for(result.experiment, result.config)
        pending: Path | None = store.pending_path(result.experiment, result.config)
        try:
            write_atomic(pending, result.to_json())
        except OSError:
            pending = spare_pending_path(result.experiment, result.config)
            try:
                write_atomic(pending, result.to_json())
            except OSError:
                pending = None
        if pending is None:
            where = "and could not be saved anywhere else either (the trained values are in this error's result)"
        elif pending.parent == store.checkpoint_dir(result.experiment, result.config):
            where = (f"and is kept, with the checkpoints, in {pending}. Fix the folder and run the same command "
                     "again: it stores this result without training")
        else:
            where = (f"and is kept in {pending}. Fix the folder and run the same command again: it stores this "
                     "result without training")
        raise PendingResultError(f"the result of {result.experiment} could not be written to {target} "
                                 f"({type(err).__name__}: {err}) {where}.", pending, result) from err


def training_allowed(allow: bool | None = None) -> bool:
    """``allow`` if given, else ``$HACN_ALLOW_TRAIN`` (default yes; book builds set 0)."""
    if allow is not None:
        return allow
    return os.environ.get(ALLOW_TRAIN_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


@dataclass(frozen=True)
class RunContext:
    """What a training function gets besides its configuration."""

    experiment: str
    checkpoint_dir: Path
    progress: bool = True


TrainFn = Callable[[dict[str, Any], RunContext], Mapping[str, Any]]


def run_or_load(
    experiment: str,
    config: Mapping[str, Any],
    train: TrainFn,
    *,
    store: ResultsStore | None = None,
    profile: str | None = None,
    allow_train: bool | None = None,
    progress: bool = True,
    threads: int | None = None,
) -> RunResult:
    """Return the stored result of ``experiment`` at ``config``, training it first if needed.

    ``train(config, context)`` returns a mapping with ``metrics`` (final values),
    optionally ``curves`` (per-epoch lists) and ``device`` (where it ran).
    The run is looked up, trained and filed with torch pinned to ``threads`` CPU
    threads (:func:`requested_threads`; the previous count is restored after it)
    and, under torchrun, as one run of all the ranks (see the module docstring).
    A pending result of the configuration (trained, but its file could not be
    written) is stored without training. Before training, the folders are
    checked (:func:`check_can_store`).
    """
    with pinned_threads(requested_threads(threads)):
        return _run_or_load(experiment, config, train, store=store or default_store(profile), profile=profile,
                            allow_train=allow_train, progress=progress)


def _run_or_load(experiment: str, config: Mapping[str, Any], train: TrainFn, *, store: ResultsStore,
                 profile: str | None, allow_train: bool | None, progress: bool) -> RunResult:
    """:func:`run_or_load` with the threads pinned."""
    config = dict(_canonical(config))
    plan = planned_execution(current_threads())
    filed = filed_config(config, plan)
    found = stored_or_pending(store, experiment, filed, rank=plan.rank)
    if found is not None:
        return found
    if not training_allowed(allow_train):
        threads = f" --threads {plan.threads}" if plan.threads != DEFAULT_THREADS else ""
        raise MissingResultError(
            f"no stored result for {experiment} (config hash {config_hash(filed)}) in {store.root}, "
            f"and training is disabled ({ALLOW_TRAIN_ENV}=0). Produce it with: "
            f"python -m hacn_core run {experiment} --profile {profile or 'book'}{threads}"
        )
    context = RunContext(experiment, store.checkpoint_dir(experiment, filed), progress)
    if plan.rank == 0:  # the other ranks write nothing
        if not (context.checkpoint_dir / _CHECKPOINT_FILE).exists():
            others = paused_elsewhere(store, experiment, config, plan)
            if others:
                raise PausedElsewhereError(paused_elsewhere_message(experiment, config, plan, others))
        check_can_store(store, experiment, filed, profile)
    if plan.rank != 0:
        return _train_and_store(experiment, config, train, context, store, profile)
    with run_lock(context.checkpoint_dir, f"{experiment} (config hash {config_hash(filed)})"):
        found = stored_or_pending(store, experiment, filed, rank=plan.rank)  # finished while we waited for the lock
        if found is not None:
            return found
        return _train_and_store(experiment, config, train, context, store, profile)


def _train_and_store(experiment: str, config: dict[str, Any], train: TrainFn, context: RunContext,
                     store: ResultsStore, profile: str | None) -> RunResult:
    version = begin_training()
    started = time.perf_counter()
    out = train(dict(config), context)
    wall_s, segments = with_earlier_segments(time.perf_counter() - started)
    result = store_trained(experiment, config, out, store=store, profile=profile, version=version,
                           wall_s=wall_s, segments=segments)
    shutil.rmtree(context.checkpoint_dir, ignore_errors=True)  # the stored result supersedes them
    return result


def with_earlier_segments(wall_s: float) -> tuple[float, int | None]:
    """This process's training time ``wall_s`` plus that of the earlier processes of a resumed run, and the
    number of segments (None when the trainer kept no record, e.g. nothing was trained through it)."""
    training = sys.modules.get("hacn_core.engine.training")
    summary = training.segments_summary() if training is not None else None
    if summary is None:
        return wall_s, None
    return wall_s + summary["earlier_wall_s"], summary["segments"]


def begin_training() -> dict[str, Any]:
    """Call right before a training: returns :func:`code_version` (the commit the process
    runs) and resets what the provenance reads from the process (the AWNN node last used,
    the trainer's segments), so that a stored run records only what it ran itself."""
    fast_cpp = sys.modules.get("hacn_core.awnn.fast_cpp")
    if fast_cpp is not None:
        fast_cpp.forget_last_node()
    training = sys.modules.get("hacn_core.engine.training")
    if training is not None:
        training.reset_segments()
        training.reset_precisions()
    return code_version()


def store_trained(
    experiment: str,
    config: Mapping[str, Any],
    out: Mapping[str, Any],
    *,
    store: ResultsStore,
    profile: str | None,
    version: Mapping[str, Any],
    wall_s: float,
    engine: Mapping[str, Any] | None = None,
    segments: int | None = None,
) -> RunResult:
    """Save what a training function returned (``out``) with its provenance; return the stored result.

    ``version`` is :func:`code_version` taken before training; ``wall_s`` the
    training's wall time, summed over its ``segments`` (the processes a run
    interrupted and resumed from its checkpoint trained in; recorded when
    given). ``engine`` (optional) says how the run was trained
    when it shared a process with others, e.g. ``{"name": "stacked",
    "members": 12}``: the wall time is then that of the whole group.
    If another process stored the configuration meanwhile, that result is kept.
    """
    config = dict(_canonical(config))
    if "metrics" not in out:
        raise ResultError(f"training function of {experiment} returned no 'metrics'")
    run = current_execution()
    config = filed_config(config, run)  # filed under how it ran: threads and world size
    provenance = {
        **version,
        "device": device_description(out.get("device")),
        "versions": library_versions(),
        "wall_time_s": round(wall_s, 3),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    provenance |= run.provenance()
    if segments is not None:
        provenance["segments"] = int(segments)
    training = sys.modules.get("hacn_core.engine.training")
    devices = training.segment_devices() if training is not None else []
    if len(devices) > 1:  # resumed on another machine: every device it trained on, first used first
        provenance["device"] = "; ".join(devices)
    if engine is not None:
        provenance["engine"] = dict(engine)
    if training is not None and training.precisions_used() is not None:
        provenance["precision"] = training.precisions_used()  # $HACN_PRECISION may override the study's
    fast_cpp = sys.modules.get("hacn_core.awnn.fast_cpp")
    if fast_cpp is not None and fast_cpp.last_node() is not None:
        provenance["awnn_node"] = fast_cpp.last_node()  # same values either way; the wall time differs
    result = RunResult(
        experiment=experiment,
        config=config,
        config_hash=config_hash(config),
        seed=config.get("seed"),
        metrics=_plain(out["metrics"]),
        curves=_plain(out.get("curves", {})),
        provenance=provenance,
        profile=profile,
    )
    result.checksum = result_checksum(result.metrics, result.curves)
    if run.world_size > 1:
        return _store_on_rank0(store, result, run)
    return _store_once(store, result)


def _store_once(store: ResultsStore, result: RunResult) -> RunResult:
    """Save ``result`` unless another process stored its configuration meanwhile (that one is kept)."""
    concurrent = store.load(result.experiment, result.config)
    if concurrent is not None:  # another process stored this configuration while we trained
        warnings.warn(f"{store.path_for(result.experiment, result.config)} was written by another run meanwhile; "
                      "keeping it")
        return concurrent
    return _save_or_keep_pending(store, result)


def _value_digests(result: RunResult) -> dict[str, str]:
    """SHA-256 of each metric and curve (``metrics/<name>``, ``curves/<name>``), to compare ranks."""
    values = {f"metrics/{k}": v for k, v in result.metrics.items()} | {f"curves/{k}": v for k, v in
                                                                       result.curves.items()}
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True, allow_nan=True).encode()).hexdigest()
            for k, v in values.items()}


def _store_on_rank0(store: ResultsStore, result: RunResult, run: Execution) -> RunResult:
    """Under torchrun: rank 0 stores ``result``; every rank returns what rank 0 stored, or raises its error.

    The ranks' metrics and curves are compared first. Those that differ are
    rank-local values (e.g. a callback that evaluates with its rank's own
    BatchNorm statistics, where ``fit`` evaluates with rank 0's): the file holds
    rank 0's, whose metrics and curves come from one model, and names the others
    in ``provenance["rank_dependent"]``.
    """
    import torch.distributed as dist

    digests: list[Any] = [None] * run.world_size
    dist.all_gather_object(digests, _value_digests(result))
    reply: list[Any] = [None]
    stored, error = result, None
    if run.rank == 0:
        keys = sorted(set().union(*digests))
        differ = [k for k in keys if len({d.get(k) for d in digests}) > 1]
        if differ:
            result.provenance["rank_dependent"] = differ
            warnings.warn(f"{result.experiment} {result.config_hash}: {', '.join(differ)} differ between the "
                          f"{run.world_size} ranks; rank 0's are stored", stacklevel=3)
        try:
            stored = _store_once(store, result)
            reply = [("stored", asdict(stored))]
        except Exception as err:  # every rank must hear of it, or the others wait in the broadcast
            error = err
            reply = [("error", f"{type(err).__name__}: {err}")]
    dist.broadcast_object_list(reply, src=0)
    if error is not None:
        raise error
    kind, payload = reply[0]
    if kind == "error":
        raise ResultError(f"rank 0 could not store the result of {result.experiment}: {payload}")
    return stored if run.rank == 0 else RunResult.from_dict(payload)
