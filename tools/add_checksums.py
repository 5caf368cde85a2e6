"""Write the missing checksum (SHA-256 of metrics and curves) into stored results.

Results stored before checksums existed carry none; ``ResultsStore.read`` loads
them with a warning. This adds it and changes nothing else in a file (see
:func:`hacn_core.engine.results.add_checksums`). Usage::

    python tools/add_checksums.py            # the committed results/
    python tools/add_checksums.py DIR        # another store
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hacn_core.engine.results import COMMITTED_STORE, add_checksums  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?", default=str(COMMITTED_STORE), help="results folder (default: results/)")
    args = parser.parse_args()
    changed = add_checksums(args.store)
    print(f"added a checksum to {len(changed)} result file(s) in {args.store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
