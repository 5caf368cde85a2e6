#!/usr/bin/env bash
# Keep results/ out of what the device tool sends (its limit is 64 MiB; results/ alone is about that).
#
#   tools/device_tree.sh hide      # before a device run: results/ leaves the index and is ignored
#   tools/device_tree.sh restore   # right after it: the index is HEAD's again, results/ tracked as before
#
# While hidden, `git status` shows every stored result as deleted: do not commit until restored
# (a commit then would delete results/ from the repository). A GPU check needs none of results/:
# tools/gpu_checks.sh writes its records into $OUT, and they are copied into benchmarks/gpu-records/ here.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=.git/info/exclude
case "${1:-}" in
  hide)
    git diff --cached --quiet || { echo "the index has staged changes: commit or unstage them first" >&2; exit 2; }
    git rm -r --cached -q results
    grep -qx "/results/" "$exclude" || echo "/results/" >> "$exclude"
    echo "results/ hidden from the device tool; run 'tools/device_tree.sh restore' after the device run" ;;
  restore)
    git reset -q
    sed -i '/^\/results\/$/d' "$exclude"
    echo "results/ tracked again (index = HEAD)" ;;
  *) echo "usage: tools/device_tree.sh hide|restore" >&2; exit 2 ;;
esac
