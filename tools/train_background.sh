#!/usr/bin/env bash
# Train an experiment's missing runs in the background, resumably, from a frozen copy of the code.
#
#   tools/train_background.sh EXPERIMENT [PROFILE] [WORKERS]      # e.g. hacn-mixer-long book 2
#   tools/train_background.sh hacn-vit,hacn-decoder,hacn-mixer-long book 2   # a queue, in this order
#   HACN_RUN_ARGS="--where depth=50" tools/train_background.sh gates-keras paper 1
#
# A thin wrapper over the launcher (hacn_core/engine/launch.py). For each experiment it makes (or
# reuses) a git worktree of the current commit under $HACN_RUNS (default ../runs/<experiment>), so
# editing the checkout does not change code under a running job, and seeds its store with the runs
# already in results/<experiment>, so they are not trained again. Then one detached (setsid nohup)
# process runs, nice'd, for each experiment of the queue in turn, in its worktree:
#   python -m hacn_core run EXPERIMENT --profile PROFILE --launcher local --max-jobs WORKERS --wait \
#       --checkpoint-every 2m $HACN_RUN_ARGS
# that is, at most WORKERS (default 2) local jobs at once, each a process training one run with one
# torch thread (HACN_THREADS=1), the next missing run submitted when a job ends; the next experiment
# of the queue starts when none is missing, so no core idles between studies. Results go to
# $HACN_RUNS/store (HACN_RESULTS), trained weights to $HACN_RUNS/models (HACN_KEEP_MODELS), the
# launcher's log to $HACN_RUNS/launcher.log, each job's log to $HACN_RUNS/store/.launch/<experiment>/.
# Stopping the launcher (kill -TERM, -INT or -HUP of its pid; pkill -TERM -f 'hacn_core run EXPERIMENT ')
# passes the signal on to its jobs, which save a checkpoint and stop, and ends the queue; running this
# script again resumes every run where it stopped. With --stacked in HACN_RUN_ARGS the experiment's
# stacked engine trains in the launcher's own process (--launcher inline; WORKERS must be 1).
# tools/collect_results.sh copies finished results into results/ of the checkout. To see how far
# they are (with each job's id and state):
#   python -m hacn_core status EXPERIMENT --profile PROFILE --results $HACN_RUNS/store
set -euo pipefail
if [ "${1:-}" = "--queue" ]; then  # the detached process: each experiment's launcher in turn, in the foreground
  queue=$2; profile=$3; workers=$4
  repo=$(cd "$(dirname "$0")/.." && pwd)
  python=${HACN_PYTHON:-$repo/.venv/bin/python}
  data=${HACN_DATA:-$repo/.data}
  launcher=(--launcher local --max-jobs "$workers" --wait)
  case " ${HACN_RUN_ARGS:-} " in *" --stacked "*) launcher=(--launcher inline) ;; esac
  IFS=, read -r -a exps <<< "$queue"
  for exp in "${exps[@]}"; do
    runs=${HACN_RUNS:-$(dirname "$repo")/runs/$exp}
    status=0
    # shellcheck disable=SC2086  # HACN_RUN_ARGS: several flags
    ( cd "$runs/code" && HACN_DATA="$data" HACN_RESULTS="$runs/store" HACN_KEEP_MODELS="$runs/models" HACN_QUIET=1 \
        HACN_THREADS=1 OMP_NUM_THREADS=1 exec nice -n 10 "$python" -m hacn_core run "$exp" --profile "$profile" \
        "${launcher[@]}" --checkpoint-every 2m ${HACN_RUN_ARGS:-} ) >> "$runs/launcher.log" 2>&1 < /dev/null || status=$?
    # 129 / 130 / 143: stopped by SIGHUP / SIGINT / SIGTERM (the jobs' checkpoints are saved): the queue stops too
    case $status in 129|130|143) exit "$status" ;; esac
  done
  exit 0
fi
queue=${1:?usage: tools/train_background.sh EXPERIMENT[,EXPERIMENT...] [PROFILE] [WORKERS]}
profile=${2:-book}
workers=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse HEAD)
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "WORKERS=$workers: allowed an integer >= 1" >&2; exit 2; }
case " ${HACN_RUN_ARGS:-} " in *" --stacked "*)
  [ "$workers" = 1 ] || { echo "--stacked trains in one process: WORKERS must be 1, not $workers" >&2; exit 2; } ;;
esac
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
    # its launcher, or jobs a killed launcher left (submitit's processes name the jobs' folder)
    if pgrep -f "hacn_core run $exp " > /dev/null || pgrep -f "submitit.* $runs/store/.launch/$exp\$" > /dev/null; then
      echo "the launcher or jobs of $exp are running; stop them first (pkill -TERM -f 'hacn_core run $exp ')" >&2
      exit 2
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
# its own session (setsid), so the launcher outlives the shell that started it
setsid nohup "$0" --queue "$queue" "$profile" "$workers" > /dev/null 2>&1 < /dev/null &
echo "started the launcher of ${queue//,/ then } ($profile, at most $workers job(s) at once) at ${commit:0:10};" \
  "logs in ../runs/<experiment>/launcher.log"
