"""The fast path, part 3: the C++ build of AWNN's fused node, and the choice between it and the Python one.

:class:`hacn_core.awnn.AdaptiveMLP` runs its whole forward (Eq. 14) as one autograd
node with a hand-written backward. The node exists twice, with the same ATen ops in
the same order, so the two give the same values and gradients bit for bit
(``tests/test_awnn_ext.py``):

* ``python``: :class:`hacn_core.awnn.fast_node.AdaptiveMLPFunction`, readable, always there;
* ``cpp``: ``hacn_core/awnn/csrc/awnn_fused.cpp``, compiled on first use by
  :func:`torch.utils.cpp_extension.load` (a C++ compiler and ninja are needed; about
  35 s once on a 2-core machine, then cached under ``$TORCH_EXTENSIONS_DIR``, by
  default ``~/.cache/torch_extensions``). It removes the Python interpreter from the
  ~30 tensor ops of a training step, which at the paper's tabular widths cost as much
  as the arithmetic (``benchmarks/bench_awnn.py`` times both side by side).

The backend is chosen by ``$HACN_AWNN_BACKEND`` or :func:`set_backend` /
:func:`use_backend`:

* ``auto`` (default): ``cpp`` if it builds, else ``python`` with one warning that
  says why;
* ``cpp``: ``cpp`` or an error that says why it did not build;
* ``python``: never compiles anything.

:func:`use_build` runs a block with another compiled build of the node (how
``benchmarks/bench_awnn_backbones.py --compare-node REV`` times an older revision's node
beside this one).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import torch

__all__ = ["ACTIVATION_CODES", "BACKENDS", "ENV_VAR", "active_backend", "backend", "build_error", "forget_last_node",
           "last_node", "module", "set_backend", "use_backend", "use_build"]

BACKENDS: tuple[str, ...] = ("auto", "cpp", "python")
ENV_VAR = "HACN_AWNN_BACKEND"
ACTIVATION_CODES: dict[str, int] = {"relu": 0, "leaky_relu": 1, "relu6": 2, "tanh": 3}  # as in the C++ enum
SOURCE = Path(__file__).resolve().parent / "csrc" / "awnn_fused.cpp"

_lock = threading.Lock()
_override: str | None = None
_attempted = False  # one build (or cache load) per process
_built: dict[str, object] = {}  # "module" (None if the build failed), "error", "warned"
_last: str | None = None  # the node of the last forward, for the provenance of stored runs


def _check_backend(name: object, field: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{field}={name!r} is not a backend of AWNN's fused node; allowed: {', '.join(BACKENDS)}")
    return str(name)


def backend() -> str:
    """The configured backend: :func:`set_backend`'s, else ``$HACN_AWNN_BACKEND``, else ``auto``."""
    if _override is not None:
        return _override
    return _check_backend(os.environ.get(ENV_VAR, "auto").strip().lower() or "auto", ENV_VAR)


def set_backend(name: str | None) -> None:
    """Choose the backend for this process (``None``: back to ``$HACN_AWNN_BACKEND``)."""
    global _override
    _override = None if name is None else _check_backend(name, "backend")


@contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run a block with another backend; a graph built inside keeps its node for its backward."""
    global _override
    previous = _override
    set_backend(name)
    try:
        yield
    finally:
        _override = previous


#: the compiler flags (part of the cached build's name); no -ffast-math or -march: the values
#: must stay those of the Python node, and a build in a shared cache must run on every CPU of
#: its architecture
CFLAGS: tuple[str, ...] = ("-O2",)


def _extension_name() -> str:
    # the source, the flags and the torch build are in the name, so checkouts with other
    # sources (or another torch) sharing one cache never load each other's library; so is the
    # source's path: ninja's build file names it, and two checkouts (git worktrees, a CI clone)
    # sharing one name would rebuild it each time the other had built it last
    key = SOURCE.read_bytes() + " ".join(CFLAGS).encode() + torch.__version__.encode() + str(SOURCE).encode()
    digest = hashlib.sha256(key).hexdigest()[:12]
    return f"hacn_awnn_fused_{digest}"


def _build(name: str) -> ModuleType:
    if shutil.which("ninja") is None:  # pip's ninja lands beside the interpreter of a venv that is not activated
        beside = Path(sys.executable).parent
        if (beside / "ninja").exists():
            os.environ["PATH"] = f"{beside}{os.pathsep}{os.environ.get('PATH', '')}"
    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    log.setLevel(logging.ERROR)  # its import warns that a CPU-only machine has no CUDA runtime
    try:
        from torch.utils.cpp_extension import _get_build_directory, load

        build_dir = Path(_get_build_directory(name, False))
        with _build_guard(build_dir):
            return load(name=name, sources=[str(SOURCE)], extra_cflags=list(CFLAGS), verbose=False)
    finally:
        log.setLevel(level)


@contextmanager
def _build_guard(build_dir: Path) -> Iterator[None]:
    """Hold an advisory lock on ``build_dir`` while the extension builds or loads, and clear a stale baton.

    torch's ``load`` marks a build in progress with a ``lock`` file in the build folder and makes every
    other process wait, polling, until it is gone; a build killed mid-way (Ctrl-C, a time limit, a lost
    machine) leaves the file, and from then on every process waits forever. Here each build first takes an
    ``flock`` on ``<build_dir>.hacn-lock``, which the kernel releases when its holder ends however it ends:
    whoever holds it is the only process of this package building that extension, so a ``lock`` file found
    then is a killed build's, and is removed."""
    import fcntl

    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir.parent / f"{build_dir.name}.hacn-lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # blocks while another process builds; released at its exit
        try:
            (build_dir / "lock").unlink(missing_ok=True)  # a killed build's baton
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def module() -> ModuleType | None:
    """The compiled extension for the configured backend, or None for the Python node.

    Builds (or loads from the cache) once per process. ``cpp`` raises if the build
    fails; ``auto`` warns once and returns None.
    """
    global _last
    choice = backend()
    if choice == "python":
        _last = "python"
        return None
    if not _attempted:
        with _lock:
            if not _attempted:
                _attempt_build()
    ext = _built.get("module")
    if ext is None:
        why = _built["error"]
        if choice == "cpp":
            raise RuntimeError(
                f"the backend is cpp ({ENV_VAR} or set_backend), but the C++ node of AWNN ({SOURCE}) did not build: {why}\n"
                f"It needs a C++ compiler and ninja (pip install ninja); set {ENV_VAR}=python to use the "
                "Python node (same values, slower).")
        if not _built.get("warned"):
            _built["warned"] = True
            warnings.warn(f"AWNN's C++ node did not build, so the Python node runs (same values, slower): {why}. "
                          f"Set {ENV_VAR}=python to skip the attempt.", RuntimeWarning, stacklevel=3)
    _last = "python" if ext is None else "cpp"
    return ext  # type: ignore[return-value]


def _attempt_build() -> None:
    global _attempted
    try:
        _built["module"] = _build(_extension_name())
    except Exception as exc:  # no compiler, no ninja, a read-only cache, ...
        _built["module"] = None
        _built["error"] = f"{type(exc).__name__}: {str(exc).strip()[-2000:]}"
    _attempted = True


@contextmanager
def use_build(ext: ModuleType) -> Iterator[None]:
    """Run a block with another compiled build of the node, ``ext`` (a module with this one's
    functions, e.g. an older revision's source built by ``benchmarks/bench_awnn_backbones.py
    --compare-node``). A graph built inside keeps that build's node for its backward."""
    if backend() == "python":
        raise RuntimeError(f"use_build needs the C++ backend, but {ENV_VAR} or set_backend chose python")
    module()  # the own build first, so that leaving the block restores it
    with _lock:
        previous = _built.get("module")
        _built["module"] = ext
    try:
        yield
    finally:
        with _lock:
            _built["module"] = previous


def build_error() -> str | None:
    """Why the last build attempt failed, or None."""
    return _built.get("error")  # type: ignore[return-value]


def last_node() -> str | None:
    """``cpp`` or ``python``: the node the last forward of an adaptive MLP in this process
    ran (None if none ran). Stored runs record it: values do not depend on it, wall times do."""
    return _last


def forget_last_node() -> None:
    """Reset :func:`last_node` (before a run, so that only its own forwards count)."""
    global _last
    _last = None


def active_backend() -> str:
    """``cpp`` or ``python``: the node the next forward of an adaptive MLP runs."""
    return "python" if module() is None else "cpp"
