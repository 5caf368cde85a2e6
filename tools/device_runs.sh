#!/usr/bin/env bash
# Train experiments' missing runs on a lent device machine, in one call, before a deadline.
#
#   here:       tools/device_runs.sh pack [EXP ...]    # data into .devcarry/ (ignored), results/ hidden;
#                                                      # EXP's stored runs travel too, so none trains twice,
#                                                      # and submitit, which the device's image lacks
#   on device:  HACN_GIT_COMMIT=<sha> tools/device_runs.sh DEADLINE_S JOB [JOB ...]
#   here:       tools/device_runs.sh unpack FILES_AT   # restore results/, copy finished runs into ../runs/<exp>/store
#
# JOB is EXPERIMENT:PROFILE:WORKERS:gpu|cpu[:KEY=VALUE,KEY=VALUE] (the last part becomes --where). Each
# JOB is one launcher (hacn_core/engine/launch.py), started at once beside the others:
#   python -m hacn_core run EXPERIMENT --profile PROFILE --launcher local --max-jobs WORKERS --wait \
#       --gpus 1|0 --checkpoint-every 1m [--where ...]
# that is, at most WORKERS local jobs at once, each training one run, the next missing run submitted when
# a job ends. A "gpu" JOB's jobs see the GPU (--gpus 1: on a machine of several GPUs, one each, round
# robin); a "cpu" JOB's hide it (--gpus 0), so the machine's CPU cores train beside the GPU. Two JOBs of
# one experiment never take the same run: a run held by a live job or process is not submitted.
# Each job has one torch thread (HACN_THREADS=1: the same configuration hashes as the runs trained
# here). At the deadline each launcher gets SIGTERM (timeout) and passes it on to its jobs, whose
# trainers save their checkpoints; unfinished runs are dropped here (their checkpoints come back, see
# below), finished ones come back in $OUT/results.tar with every launcher's and job's log in
# $OUT/logs.tar. Every result records the device it ran on and $HACN_GIT_COMMIT.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
carry=$repo/.devcarry
case "${1:-}" in
  pack)
    set -e
    mkdir -p "$carry"
    grep -qx "/.devcarry/" "$repo/.git/info/exclude" || echo "/.devcarry/" >> "$repo/.git/info/exclude"
    data=${HACN_DATA:-$repo/.data}
    # links are followed (-h): the offline mirror's files travel, not links to them
    tar -czhf "$carry/data.tar.gz" -C "$data" MNIST FashionMNIST TUDataset/NCI1/raw TUDataset/MUTAG/raw
    rm -rf "$carry/store"; mkdir -p "$carry/store"
    for exp in "${@:2}"; do  # the runs stored so far, here and in the background stores
      mkdir -p "$carry/store/$exp"; cp "$repo/results/$exp/"*.json "$carry/store/$exp/" 2>/dev/null || true
      cp -n "$(dirname "$repo")/runs/$exp/store/$exp/"*.json "$carry/store/$exp/" 2>/dev/null || true
      echo "$exp: $(ls "$carry/store/$exp" | wc -l) stored run(s) travel"
    done
    # the launcher's submitit (pure Python; the device machine's image lacks it): its package travels
    site=$("${HACN_PYTHON:-$repo/.venv/bin/python}" -c \
      "import os, submitit; print(os.path.dirname(os.path.dirname(submitit.__file__)))")
    tar -czf "$carry/submitit.tar.gz" -C "$site" --exclude __pycache__ submitit
    "$repo/tools/device_tree.sh" hide
    du -sh "$carry"; exit 0 ;;
  unpack)
    set -e
    at=${2:?usage: tools/device_runs.sh unpack FILES_AT}
    "$repo/tools/device_tree.sh" restore
    tmp=$(mktemp -d); tar -xf "$at/results.tar" -C "$tmp"
    for d in "$tmp"/*/; do
      exp=$(basename "$d"); dst=$(dirname "$repo")/runs/$exp/store/$exp; mkdir -p "$dst"
      n=0; for f in "$d"*.json; do [ -e "$dst/$(basename "$f")" ] || { cp "$f" "$dst/"; n=$((n + 1)); }; done
      echo "$exp: $n new result(s) into $dst"
    done
    rm -rf "$tmp"
    if ls "$at"/checkpoints.tar.part-* >/dev/null 2>&1; then  # runs stopped at the deadline: resume them here
      tmp=$(mktemp -d); cat "$at"/checkpoints.tar.part-* | tar -xf - -C "$tmp"
      for d in "$tmp"/.checkpoints/*/; do
        exp=$(basename "$d"); dst=$(dirname "$repo")/runs/$exp/store/.checkpoints/$exp; mkdir -p "$dst"
        for run in "$d"*/; do
          h=$(basename "$run")
          [ -e "$(dirname "$repo")/runs/$exp/store/$exp/$h.json" ] && continue
          [ -e "$dst/$h" ] && { echo "$exp $h: a checkpoint is here already, kept"; continue; }
          cp -r "$run" "$dst/$h" && echo "$exp $h: checkpoint to resume"
        done
      done
      rm -rf "$tmp"
    fi
    exit 0 ;;
esac
deadline=$(( $(date +%s) + ${1:?usage: tools/device_runs.sh DEADLINE_S JOB [JOB ...]} )); shift
out=${OUT:-device-out}; mkdir -p "$out/logs"; out=$(cd "$out" && pwd)
py=${HACN_PYTHON:-python3}
data=/tmp/hacn-data; store=/tmp/hacn-store; mkdir -p "$data" "$store"
tar -xzf "$carry/data.tar.gz" -C "$data"
if ! "$py" -c "import submitit" 2> /dev/null; then  # the launcher's, from pack (its jobs inherit PYTHONPATH)
  mkdir -p /tmp/hacn-site && tar -xzf "$carry/submitit.tar.gz" -C /tmp/hacn-site
  export PYTHONPATH=/tmp/hacn-site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d "$carry/store" ] && cp -r "$carry/store/." "$store/"
# HACN_MPS=1: NVIDIA's multi-process service, so the workers' small kernels share the GPU at once
[ "${HACN_MPS:-0}" = 1 ] && { nvidia-cuda-mps-control -d && echo "MPS started" || echo "MPS did not start"; }
{ date; nvidia-smi; nproc; "$py" -c "import torch; print('torch', torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"; } > "$out/logs/env.txt" 2>&1
# torch-geometric writes processed/ on first read: do it once here, not in parallel in every worker
# (only when a job trains on them: on 2026-11-27 this and the workers' staggered start took 85 s of a 548 s call)
case " $* " in *awnn-graphs*|*awnn-fixed-plus*) graphs=1 ;; *) graphs=0 ;; esac
[ "$graphs" = 1 ] && for d in "$data"/TUDataset/*/; do
  HACN_DATA="$data" "$py" -c "from hacn_core.engine.data import load_tudataset; load_tudataset('$(basename "$d")')" \
    >> "$out/logs/env.txt" 2>&1
done
pids=()
for job in "$@"; do
  IFS=: read -r exp profile workers dev where <<< "$job"
  left=$(( deadline - $(date +%s) )); [ "$left" -lt 30 ] && break
  gpus=0; [ "$dev" = gpu ] && gpus=1
  args=(); [ -n "${where:-}" ] && args=(--where ${where//,/ })
  log="$out/logs/$exp-$dev-${where//[=,]/_}.log"
  hide=(); [ "$dev" = cpu ] && hide=(CUDA_VISIBLE_DEVICES=)  # the launcher of CPU jobs leaves the GPU alone too
  # SIGTERM at the deadline: the launcher passes it on and waits for its jobs' checkpoints (20 s at most)
  env "${hide[@]}" HACN_DATA="$data" HACN_THREADS=1 OMP_NUM_THREADS=1 HACN_QUIET=1 \
    timeout -s TERM -k 20 "$left" "$py" -m hacn_core run "$exp" --profile "$profile" --results "$store" \
    --launcher local --max-jobs "$workers" --wait --gpus "$gpus" --checkpoint-every 1m "${args[@]}" \
    > "$log" 2>&1 < /dev/null &
  pids+=($!)
done
echo "started ${#pids[@]} launcher(s); deadline in $(( deadline - $(date +%s) )) s"
wait "${pids[@]}"
# jobs a launcher killed at the deadline (timeout -k) left behind: stopped now (each job is a session
# of its own; submitit's processes name the store's .launch folder)
left_over=$(pgrep -f "submitit.* $store/.launch/" || true)
[ -n "$left_over" ] && { echo "stopping jobs left running: $left_over"; kill -KILL $left_over 2>/dev/null || true; }
[ -d "$store/.launch" ] && (cd "$store" && find .launch -name "*_log.*" -print0 | tar -cf "$out/logs/jobs.tar" --null -T -)
(cd "$store" && find . -maxdepth 2 -regextype posix-extended -regex '\./[^.][^/]*/[0-9a-f]{16}\.json' -print0 \
  | tar -cf "$out/results.tar" --null -T -)
# the checkpoints of runs stopped at the deadline come back too (in parts of at most 15 MB, the tool's
# limit per file is 16 MiB): `unpack` puts them into ../runs/<exp>/store, where a worker here resumes them
if [ -d "$store/.checkpoints" ]; then
  (cd "$store" && find .checkpoints -name run.lock -delete; tar -cf - .checkpoints) | split -b 15M - "$out/checkpoints.tar.part-"
fi
tar -cf "$out/logs.tar" -C "$out" logs && rm -rf "$out/logs"
tar -tf "$out/results.tar" | awk -F/ '{print $2}' | sort | uniq -c
echo "done, $(( deadline - $(date +%s) )) s before the deadline"
