#!/usr/bin/env bash
# Copy the finished results of background runs (tools/train_background.sh) into results/.
#
#   tools/collect_results.sh EXPERIMENT
#
# Only complete result files (<config hash>.json) are copied, never checkpoints; a file
# already in results/ is left as it is. Prints what it copied and what is still running.
set -euo pipefail
exp=${1:?usage: tools/collect_results.sh EXPERIMENT}
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${HACN_RUNS:-$(dirname "$repo")/runs/$exp}
src="$runs/store/$exp"
dst="$repo/results/$exp"
mkdir -p "$dst"
copied=0
for f in "$src"/*.json; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  [[ $name =~ ^[0-9a-f]{16}\.json$ ]] || continue
  if [ ! -e "$dst/$name" ]; then cp "$f" "$dst/$name"; copied=$((copied + 1)); fi
done
echo "copied $copied new result(s) of $exp into results/$exp ($(ls "$dst" | wc -l) stored)"
ls -d "$runs/store/.checkpoints/$exp"/*/ 2>/dev/null | sed 's|.*/\([0-9a-f]*\)/$|  unfinished: \1|' || true
