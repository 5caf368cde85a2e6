"""The results store: one JSON file per run, and ``run_or_load``.

Every number the book shows comes from a file here. A run is identified by its
experiment id and the hash of its full configuration (seed included); the file
``<store>/<experiment>/<config_hash>.json`` holds the configuration, the hash,
the seed, the final metrics, the per-epoch curves and the provenance: code
version (git commit and whether the tree was dirty), device, library versions,
wall time, date and profile.

``run_or_load`` is the entry point of every experiment: a stored result whose
hash matches is returned as it is; otherwise the experiment trains, the result
is written atomically (temporary file, then rename) and returned. A corrupted or
mismatching file raises; it is never silently overwritten.

The store lives in ``results/`` of the repository unless ``$HACN_RESULTS`` names
another folder (tests and nbval point it at a temporary one).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_ENV = "HACN_RESULTS"
ALLOW_TRAIN_ENV = "HACN_ALLOW_TRAIN"
SCHEMA_VERSION = 1
REPO_ROOT = Path(__file__).resolve().parents[2]


class ResultError(RuntimeError):
    """Base class of the store's errors."""


class CorruptResultError(ResultError):
    """A stored file cannot be read or is missing fields."""


class ResultMismatchError(ResultError):
    """A stored file does not belong to the configuration it is filed under."""


class MissingResultError(ResultError):
    """No stored result, and training is not allowed here (e.g. during a book build)."""


def _canonical(value: Any) -> Any:
    """JSON-ready form of a configuration value (tuples become lists, keys strings)."""
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
    it imported when it started, whatever is committed while it trains.
    """
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


class ResultsStore:
    """A folder of results, one JSON file per run."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        if root is None:
            root = os.environ.get(RESULTS_ENV) or REPO_ROOT / "results"
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.root)!r})"

    def path_for(self, experiment: str, config: Mapping[str, Any]) -> Path:
        return self.root / experiment / f"{config_hash(config)}.json"

    def read(self, path: str | os.PathLike[str]) -> RunResult:
        """Read one file, checking that it is intact and filed under its own hash."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptResultError(
                f"{path}: cannot be read as a result ({type(err).__name__}: {err}). "
                "Move it aside (or restore it from git) and run the experiment again."
            ) from err
        if not isinstance(data, dict):
            raise CorruptResultError(f"{path}: expected a JSON object, found {type(data).__name__}")
        result = RunResult.from_dict(data, str(path))
        actual = config_hash(result.config)
        if actual != result.config_hash or path.stem != actual:
            raise ResultMismatchError(
                f"{path}: its configuration hashes to {actual}, but the file records {result.config_hash} "
                f"and is named {path.stem}. It was edited or misfiled; restore it from git or move it aside."
            )
        if path.parent.name != result.experiment:
            raise ResultMismatchError(
                f"{path}: records experiment {result.experiment!r} but is filed under {path.parent.name!r}"
            )
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
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self.read(path)  # raises if the existing file is corrupt: never overwrite it silently
            raise ResultError(f"{path} exists already; delete it first to rerun this configuration")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(result.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def iter_results(self, experiment: str | None = None) -> Iterator[RunResult]:
        """Every stored result (of one experiment, if given), in file-name order."""
        if not self.root.is_dir():
            return
        folders = (
            [self.root / experiment]
            if experiment
            else sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        )
        for folder in folders:
            for path in sorted(folder.glob("*.json")):
                yield self.read(path)

    def checkpoint_dir(self, experiment: str, config: Mapping[str, Any]) -> Path:
        """Where an unfinished run keeps its checkpoints: ``<store>/.checkpoints/...``.

        Inside the store (so a temporary store gets temporary checkpoints) but in a
        hidden folder that git ignores; removed once the result is saved.
        """
        return self.root / ".checkpoints" / experiment / config_hash(config)


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
) -> RunResult:
    """Return the stored result of ``experiment`` at ``config``, training it first if needed.

    ``train(config, context)`` returns a mapping with ``metrics`` (final values),
    optionally ``curves`` (per-epoch lists) and ``device`` (where it ran).
    """
    store = store or ResultsStore()
    config = dict(_canonical(config))
    found = store.load(experiment, config)
    if found is not None:
        return found
    if not training_allowed(allow_train):
        raise MissingResultError(
            f"no stored result for {experiment} (config hash {config_hash(config)}) in {store.root}, "
            f"and training is disabled ({ALLOW_TRAIN_ENV}=0). Produce it with: "
            f"python -m hacn_core run {experiment} --profile {profile or 'book'}"
        )
    context = RunContext(experiment, store.checkpoint_dir(experiment, config), progress)
    version = begin_training()
    started = time.perf_counter()
    out = train(dict(config), context)
    wall_s, segments = time.perf_counter() - started, None
    training = sys.modules.get("hacn_core.engine.training")
    summary = training.segments_summary() if training is not None else None
    if summary is not None:  # resumed from a checkpoint: add the training time of the earlier processes
        wall_s, segments = wall_s + summary["earlier_wall_s"], summary["segments"]
    result = store_trained(experiment, config, out, store=store, profile=profile, version=version,
                           wall_s=wall_s, segments=segments)
    shutil.rmtree(context.checkpoint_dir, ignore_errors=True)  # the stored result supersedes them
    return result


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
    provenance = {
        **version,
        "device": device_description(out.get("device")),
        "versions": library_versions(),
        "wall_time_s": round(wall_s, 3),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if segments is not None:
        provenance["segments"] = int(segments)
    if engine is not None:
        provenance["engine"] = dict(engine)
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
    concurrent = store.load(experiment, config)
    if concurrent is not None:  # another process stored this configuration while we trained
        warnings.warn(f"{store.path_for(experiment, config)} was written by another run meanwhile; keeping it")
        return concurrent
    store.save(result)
    return result
