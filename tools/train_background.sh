#!/usr/bin/env bash
# Train an experiment's missing runs in the background, resumably, from a frozen copy of the code.
#
#   tools/train_background.sh EXPERIMENT [PROFILE] [WORKERS]      # e.g. hacn-mixer-long book 2
#   tools/train_background.sh hacn-vit,hacn-decoder,hacn-mixer-long book 2   # a queue, in this order
#   HACN_RUN_ARGS="--stacked --where depth=50" tools/train_background.sh gates-keras paper 1
#
# A comma-separated list is a queue: each worker trains the first experiment's free runs, then
# goes on to the next experiment, so no core idles between studies. Every experiment keeps its own
# folder ../runs/<experiment> (code, store, logs) as when started alone.
#
# Makes (or reuses) a git worktree of the current commit under $HACN_RUNS (default
# ../runs/<experiment>), so editing the checkout does not change code under a running
# job, and starts WORKERS (default 2) nice'd processes of
#   python -m hacn_core run EXPERIMENT --profile PROFILE --checkpoint-every 2m
# with one torch thread each (plus $HACN_RUN_ARGS, e.g. --stacked or a --where selection). The workers share the runs: a run another worker holds
# (run.lock) is skipped, so each takes the next free one. Results go to
# $HACN_RUNS/store (HACN_RESULTS), trained weights to $HACN_RUNS/models
# (HACN_KEEP_MODELS), logs to $HACN_RUNS/worker<i>.log. The runs already in results/<experiment>
# are copied into the store first, so they are not trained again. Stopping them (kill, SIGINT,
# SIGTERM, the end of a session) saves a checkpoint; running this script again resumes
# every run where it stopped. tools/collect_results.sh copies finished results into
# results/ of the checkout. To see how far they are:
#   python -m hacn_core status EXPERIMENT --profile PROFILE --results $HACN_RUNS/store
set -euo pipefail
if [ "${1:-}" = "--worker" ]; then  # one worker: the queue's experiments in order, in the foreground
  i=$2; queue=$3; profile=$4
  repo=$(cd "$(dirname "$0")/.." && pwd)
  python=${HACN_PYTHON:-$repo/.venv/bin/python}
  data=${HACN_DATA:-$repo/.data}
  IFS=, read -r -a exps <<< "$queue"
  for exp in "${exps[@]}"; do
    runs=${HACN_RUNS:-$(dirname "$repo")/runs/$exp}
    status=0
    ( cd "$runs/code" && HACN_DATA="$data" HACN_RESULTS="$runs/store" HACN_KEEP_MODELS="$runs/models" HACN_QUIET=1 \
        HACN_THREADS=1 OMP_NUM_THREADS=1 exec nice -n 10 "$python" -m hacn_core run "$exp" --profile "$profile" \
        --checkpoint-every 2m ${HACN_RUN_ARGS:-} ) >> "$runs/worker$i.log" 2>&1 < /dev/null || status=$?
    # 130 / 143: stopped by SIGINT / SIGTERM (its checkpoint is saved): the queue stops with it
    if [ "$status" -eq 130 ] || [ "$status" -eq 143 ]; then exit "$status"; fi
  done
  exit 0
fi
queue=${1:?usage: tools/train_background.sh EXPERIMENT[,EXPERIMENT...] [PROFILE] [WORKERS]}
profile=${2:-book}
workers=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${HACN_PYTHON:-$repo/.venv/bin/python}
commit=$(git -C "$repo" rev-parse HEAD)
IFS=, read -r -a exps <<< "$queue"
if [ -n "${HACN_RUNS:-}" ] && [ "${#exps[@]}" -gt 1 ]; then
  echo "HACN_RUNS names one experiment's folder; a queue keeps each experiment in ../runs/<experiment>" >&2; exit 2
fi
runs_of() { echo "${HACN_RUNS:-$(dirname "$repo")/runs/$1}"; }
# each experiment: a worktree of this commit and a store seeded with the runs already in results/
for exp in "${exps[@]}"; do
  runs=$(runs_of "$exp")
  mkdir -p "$runs"
  if [ -d "$runs/code" ]; then
    if pgrep -f "hacn_core run $exp " > /dev/null; then
      echo "workers of $exp are running; stop them first (pkill -TERM -f 'hacn_core run $exp ')" >&2; exit 2
    fi
    git -C "$runs/code" checkout -q --detach "$commit"
  else
    git -C "$repo" worktree add -q --detach "$runs/code" "$commit"
  fi
  # Runs already stored in the checkout's results/ are never trained again: seed the store with them
  # (a fresh machine, or a new $HACN_RUNS, starts with an empty store).
  mkdir -p "$runs/store/$exp"
  if [ -d "$repo/results/$exp" ]; then
    for f in "$repo/results/$exp"/*.json; do
      if [ -e "$f" ] && [ ! -e "$runs/store/$exp/$(basename "$f")" ]; then cp "$f" "$runs/store/$exp/"; fi
    done
  fi
done
for i in $(seq 1 "$workers"); do
  # its own session (setsid), so the workers outlive the shell that started them
  setsid nohup "$0" --worker "$i" "$queue" "$profile" > /dev/null 2>&1 < /dev/null &
  sleep 10  # let the first worker take its lock before the next one looks
done
echo "started $workers worker(s) of ${queue//,/ then } ($profile) at ${commit:0:10}; logs in ../runs/<experiment>/worker*.log"
