#!/usr/bin/env bash
# Train App. D's Fixed+ on NCI1 (the graphs chapter's command) in the background, resumably.
#
#   tools/train_fixed_plus.sh [PROFILE]        # default book; after tools/train_background.sh awnn-graphs ...
#
# Fixed+ is not in awnn-graphs' profiles: its width is read from the stored AWNN runs
# (graphs_report.fixed_plus_width), so it can only start once every NCI1 AWNN fold is stored; until then
# this waits, looking every 2 minutes. It runs the code of ../runs/awnn-graphs/code (the worktree that
# tools/train_background.sh made) against that experiment's store, one torch thread, nice'd, checkpointed
# every 2 minutes; stopping it (SIGTERM, the end of a session) keeps the checkpoint, and starting it again
# resumes. Its log is ../runs/awnn-graphs/fixedplus.log; tools/collect_results.sh awnn-graphs collects its
# runs with the others (they are filed under awnn-graphs).
set -euo pipefail
profile=${1:-book}
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=$(dirname "$repo")/runs/awnn-graphs
[ -d "$runs/code" ] || { echo "no $runs/code: start tools/train_background.sh awnn-graphs first" >&2; exit 2; }
if pgrep -f "hacn_core.awnn.studies.graphs_report import fixed_plus" > /dev/null; then
  echo "Fixed+ is already training (pkill -TERM -f fixed_plus to stop it)" >&2; exit 2
fi
script="
import time
from hacn_core import catalog
from hacn_core.awnn.studies import graphs_report as grr
from hacn_core.awnn.studies.graphs_report import fixed_plus_width
from hacn_core.engine.registry import run_experiment
from hacn_core.engine.training import TrainingInterrupted
planned = catalog.get('awnn-graphs').runs('$profile')
while (width := fixed_plus_width(planned, catalog.stored('awnn-graphs', '$profile'))) is None:
    time.sleep(120)
print('Fixed+: every MLP', width, 'wide', flush=True)
try:
    run_experiment(grr.fixed_plus_experiment(width, '$profile'), '$profile')
except TrainingInterrupted as stop:  # SIGINT / SIGTERM: the checkpoint is saved; one line, no traceback
    print(stop, flush=True)
    raise SystemExit(stop.exit_code)
print('Fixed+: done', flush=True)
"
cd "$runs/code"
HACN_DATA=${HACN_DATA:-$repo/.data} HACN_RESULTS="$runs/store" HACN_QUIET=1 HACN_THREADS=1 OMP_NUM_THREADS=1 \
  HACN_CHECKPOINT_EVERY=2m setsid nohup nice -n 10 "${HACN_PYTHON:-$repo/.venv/bin/python}" -c "$script" \
  >> "$runs/fixedplus.log" 2>&1 < /dev/null &
echo "Fixed+ ($profile) started in the background at $(git rev-parse --short HEAD); log: $runs/fixedplus.log"
