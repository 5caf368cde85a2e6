"""Strip execution noise from notebooks: outputs, counts and volatile metadata.

Outputs are kept only in cells tagged ``nbval-check-output`` (nbval compares
them) and only when ``--execute`` produced them from a fresh run under the smoke
profile. Usage: ``python tools/strip_outputs.py [--execute] notebooks/*.ipynb``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import nbformat

CHECK_TAG = "nbval-check-output"  # the cell tag nbval reads (a tag, so the book shows no marker)


def execute(nb: nbformat.NotebookNode, path: str) -> None:
    from nbclient import NotebookClient

    os.environ["HACN_PROFILE"] = "smoke"
    os.environ["HACN_QUIET"] = "1"
    with tempfile.TemporaryDirectory(prefix="hacn-strip-") as scratch:  # smoke results go here, then away
        os.environ.setdefault("HACN_RESULTS", scratch)
        try:
            NotebookClient(nb, timeout=600, resources={"metadata": {"path": os.path.dirname(path)}}).execute()
        finally:
            if os.environ.get("HACN_RESULTS") == scratch:
                del os.environ["HACN_RESULTS"]


def strip(nb: nbformat.NotebookNode) -> None:
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        keep = CHECK_TAG in cell.metadata.get("tags", [])
        if not keep:  # nbval wants the count of a reference cell that has outputs
            cell.execution_count = None
        cell.outputs = [o for o in cell.outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"] if keep else []
        for output in cell.outputs:
            output.pop("execution_count", None)
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--execute", action="store_true", help="run under the smoke profile first")
    parser.add_argument("notebooks", nargs="+")
    args = parser.parse_args()
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        if args.execute:
            execute(nb, path)
        strip(nb)
        nbformat.write(nb, path)
        print(f"stripped {path}")


if __name__ == "__main__":
    main()
