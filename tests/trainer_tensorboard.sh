#!/usr/bin/env bash
# ctest-labels: integration;serial
# TensorBoard events beside metrics.jsonl, read back with the tensorboard package's own reader
# (tests/lib/check_tensorboard.py): every metrics.jsonl figure at its step under the HF Trainer's
# tag. A run resumed from a step-8 checkpoint after the first run reached step 20 adds a second
# file, and TensorBoard shows each step once, with this run's figures. train.resume: never
# starts runs/ over; output.tensorboard: false writes none; output.tensorboard_dir moves them;
# two ranks write one file (rank 0's); a run killed mid-run has every finished step in its file;
# a runs/ planted as a link elsewhere, or a tensorboard_dir outside RINGMASTER_ALLOWED_ROOT, is a
# warning and training finishes, writing nothing there.
# Label serial: one case starts two ranks.
set -euo pipefail
T=${TRAINER:?}
py=${RINGMASTER_PYTHON:-python3}
"$py" -c 'import tensorboard' 2>/dev/null ||
  { echo "SKIP: the tensorboard package is not installed in $py (scripts/setup.sh installs it)"; exit 77; }
check="$RINGMASTER_SOURCE_DIR/tests/lib/check_tensorboard.py"
# shellcheck source=tests/lib/ranks.sh
source "$RINGMASTER_SOURCE_DIR/tests/lib/ranks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 160 --dev 40 --seed 3

write_job() {  # $1 = output dir name, $2 = extra output keys, $3 = epochs (default 2)
  local file="$work/job_${1//\//_}.yaml"
  cat >"$file" <<YAML
name: tensorboard-test
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32, shuffle: true}
train: {epochs: ${3:-2}, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3, warmup_ratio: 0.1,
        seed: 5}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 10$2}
YAML
  echo "$file"
}

# 160 rows / 16 = 10 steps an epoch, 2 epochs: evaluations at steps 10 and 20.
"$T" train --config "$(write_job a "")" >/dev/null 2>"$work/a.log"
grep -q "TensorBoard events: $work/a/runs/events.out.tfevents" "$work/a.log" ||
  { echo "no TensorBoard line in the log"; cat "$work/a.log"; exit 1; }
[[ $(grep -c '"loss"' "$work/a/metrics.jsonl") -eq 20 ]] || { echo "expected 20 steps"; exit 1; }
"$py" "$check" "$work/a" "$work/a/runs" 1

# Resume from step 8: the copied runs/ holds steps 1..20 of run a; the new file redoes 9..20.
cp -r "$work/a" "$work/c"
rm -rf "$work/c/final" "$work/c/checkpoints/step-000000"{12,16,20}
"$T" train --config "$(write_job c "")" >/dev/null 2>"$work/c.log"
grep -q "resumed from .*step-00000008" "$work/c.log" || { echo "run c did not resume"; cat "$work/c.log"; exit 1; }
"$py" "$check" "$work/c" "$work/c/runs" 2

# train.resume: never removes the previous run's runs/ with its metrics.jsonl.
"$T" train --overwrite --config "$work/job_c.yaml" >/dev/null 2>"$work/c2.log"
grep -q "removed the previous run's .*runs" "$work/c2.log" || { echo "runs/ not removed"; cat "$work/c2.log"; exit 1; }
"$py" "$check" "$work/c" "$work/c/runs" 1

# Off: no runs/. Moved: the events are where output.tensorboard_dir says, none in runs/.
"$T" train --config "$(write_job off ", tensorboard: false")" >/dev/null 2>&1
[[ -f $work/off/metrics.jsonl && ! -e $work/off/runs ]] || { echo "output.tensorboard: false wrote runs/"; exit 1; }
"$T" train --config "$(write_job moved ", tensorboard_dir: tb/moved")" >/dev/null 2>&1
[[ ! -e $work/moved/runs ]] || { echo "tensorboard_dir ignored"; exit 1; }
"$py" "$check" "$work/moved" "$work/tb/moved" 1

# Two ranks: rank 0 alone writes, one file with the job's figures.
launch_ranks 2 1 "$(write_job two "")" "$work/two"
wait_ranks || { echo "a rank of the two-rank run failed"; cat "$work"/two-*.log; exit 1; }
"$py" "$check" "$work/two" "$work/two/runs" 1

# Each step is written when it ends, not at exit: a run killed (SIGKILL, nothing flushed at
# exit) mid-run has in its events file every step metrics.jsonl has, but maybe the last.
"$T" train --config "$(write_job killed "" 40)" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do  # bounded wait until a few steps are logged
  [[ -f $work/killed/metrics.jsonl ]] && [[ $(wc -l <"$work/killed/metrics.jsonl") -ge 3 ]] && break
  sleep 0.02
done
kill -KILL "$pid"
wait "$pid" || true
"$py" - "$work/killed" <<'PY'
import json, sys
from tensorboard.backend.event_processing import event_accumulator
out = sys.argv[1]
steps = [json.loads(l)["step"] for l in open(f"{out}/metrics.jsonl") if '"loss"' in l]
acc = event_accumulator.EventAccumulator(f"{out}/runs", size_guidance={"scalars": 0})
acc.Reload()
tb = [e.step for e in acc.Scalars("train/loss")] if "train/loss" in acc.Tags()["scalars"] else []
if len(steps) < 3 or steps[-1] >= 400 or tb not in (steps, steps[:-1]):
    sys.exit(f"killed run: metrics.jsonl steps {steps}, TensorBoard train/loss steps {tb}")
print(f"ok: killed at step {steps[-1]}: TensorBoard has steps 1..{tb[-1]}")
PY

# A link planted as runs/: refused with one warning; training finishes and writes nothing there.
mkdir -p "$work/linked" "$work/elsewhere"
ln -s "$work/elsewhere" "$work/linked/runs"
"$T" train --config "$(write_job linked "")" >/dev/null 2>"$work/linked.log"
[[ $(grep -c "WARNING.*output.tensorboard: cannot write TensorBoard events" "$work/linked.log") -eq 1 ]] ||
  { echo "expected one warning for the linked runs/"; cat "$work/linked.log"; exit 1; }
[[ -d $work/linked/final && -z $(ls -A "$work/elsewhere") ]] ||
  { echo "training did not finish, or wrote through the link"; exit 1; }

# Under an agent's --allowed-root (RINGMASTER_ALLOWED_ROOT), a tensorboard_dir outside the root
# is refused with a warning, like the link; one inside it, beside output.dir, is written.
mkdir -p "$work/root"
job=$(write_job root/escape ", tensorboard_dir: $work/elsewhere/tb")
RINGMASTER_ALLOWED_ROOT=$work/root "$T" train --config "$job" >/dev/null 2>"$work/escape.log"
grep -q "WARNING.*output.tensorboard: cannot write TensorBoard events in $work/elsewhere/tb" "$work/escape.log" ||
  { echo "a tensorboard_dir outside the allowed root was not refused"; cat "$work/escape.log"; exit 1; }
[[ -d $work/root/escape/final && -z $(ls -A "$work/elsewhere") ]] ||
  { echo "training did not finish, or wrote outside the allowed root"; exit 1; }
job=$(write_job root/inside ", tensorboard_dir: $work/root/tb")
RINGMASTER_ALLOWED_ROOT=$work/root "$T" train --config "$job" >/dev/null 2>&1
"$py" "$check" "$work/root/inside" "$work/root/tb" 1
echo "ok: TensorBoard events equal metrics.jsonl (fresh, resumed, overwritten, moved, two ranks, killed, allowed root); off, a linked runs/ and a directory outside the allowed root write none"
