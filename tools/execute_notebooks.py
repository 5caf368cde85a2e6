"""Execute the book's notebooks on every core before ``jupyter-book build`` reads them (``make book-build``).

    python tools/execute_notebooks.py --cache _build/.jupyter_cache --config _build/book-config.yml

Jupyter Book executes a book's notebooks one after another, on one core, and most of a notebook's
time here is start-up (a kernel, torch, the house style) rather than work, so a 2-core machine
idles half of the build. This script

1. empties the Jupyter cache at ``--cache`` (nothing stale survives: the chapters' numbers come
   from results/, which the cache's notebook hash does not see),
2. executes every notebook of ``_toc.yml`` into it, one process per core (jupyter-cache's
   ``local-parallel`` executor, each in its own folder as Jupyter Book would run it),
3. writes ``--config``: ``_config.yml`` with ``execute_notebooks: cache`` and that cache,

so that ``jupyter-book build . --config <that file>`` finds every notebook executed and only renders
it. A notebook that fails here is left out of the cache: the build executes it again itself and
reports the error with its traceback, as a plain build does. ``_config.yml`` keeps ``force``, so
``jupyter-book build .`` on its own still executes everything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: every kernel's IPython configuration here: drop ipykernel's one warning per kernel that it talks over TCP
#: without encryption. The kernels listen on 127.0.0.1 only and run the book's own notebooks, so it says
#: nothing to a reader of the build log (16-18 identical lines a build).
KERNEL_CONFIG = """\
# written by tools/execute_notebooks.py for the book's notebook kernels
import logging


class _NoPlainTcpWarning(logging.Filter):
    def filter(self, record):
        return "Kernel is running over TCP without encryption" not in record.getMessage()


logging.getLogger("IPKernelApp").addFilter(_NoPlainTcpWarning())
"""


@contextlib.contextmanager
def quiet_kernels(ipython_dir: Path) -> Iterator[None]:
    """Within the block, ``$IPYTHONDIR`` (the kernels inherit it) is ``ipython_dir``, whose default profile
    holds :data:`KERNEL_CONFIG`: a folder of the build's own, so no one's IPython profile is read or written."""
    profile = ipython_dir / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    saved = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = str(ipython_dir.resolve())
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("IPYTHONDIR", None)
        else:
            os.environ["IPYTHONDIR"] = saved


def toc_notebooks(toc: Path) -> list[Path]:
    """The ``.ipynb`` files that ``toc`` names (entries are paths without suffix, relative to the toc's folder)."""
    found: list[Path] = []
    root = toc.resolve().parent

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str) and (root / f"{node[key]}.ipynb").is_file():
                    found.append(root / f"{node[key]}.ipynb")
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load(toc.read_text()))
    return found


def cached_config(config: Path, cache: Path) -> dict:
    """``config`` (a Jupyter Book ``_config.yml``) set to read executed notebooks from ``cache``."""
    data = yaml.safe_load(config.read_text())
    execute = dict(data.get("execute") or {})
    execute.update(execute_notebooks="cache", cache=str(cache.resolve()))
    sphinx = dict(data.get("sphinx") or {})
    if sphinx.get("local_extensions"):  # Jupyter Book finds them relative to the config file: make them absolute
        sphinx["local_extensions"] = {name: str((config.parent / path).resolve())
                                      for name, path in sphinx["local_extensions"].items()}
    return {**data, "execute": execute, "sphinx": sphinx}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="the Jupyter cache folder (emptied first)")
    parser.add_argument("--config", type=Path, required=True, help="where to write the build's config")
    parser.add_argument("--toc", type=Path, default=ROOT / "_toc.yml")
    parser.add_argument("--book-config", type=Path, default=ROOT / "_config.yml")
    args = parser.parse_args(argv)

    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    timeout = (yaml.safe_load(args.book_config.read_text()).get("execute") or {}).get("timeout", 900)
    notebooks = toc_notebooks(args.toc)
    cache = get_cache(args.cache)
    cache.clear_cache()
    for path in notebooks:
        cache.add_nb_to_project(str(path))
    started = time.monotonic()
    with quiet_kernels(args.cache.parent / "ipython"):
        result = load_executor("local-parallel", cache).run_and_cache(timeout=timeout, allow_errors=False)
    failed = [*result.excepted, *result.errored]
    print(f"executed {len(result.succeeded)} of {len(notebooks)} notebooks in {time.monotonic() - started:.0f} s "
          f"on {os.cpu_count()} cores" + (f"; the build reruns and reports: {', '.join(map(str, failed))}"
                                          if failed else ""))
    args.config.parent.mkdir(parents=True, exist_ok=True)
    args.config.write_text("# generated by tools/execute_notebooks.py from _config.yml: do not edit\n"
                           + yaml.safe_dump(cached_config(args.book_config, args.cache), sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
