#!/usr/bin/env bash
# ctest-labels: integration;serial
# Evaluation every N steps, the best model and early stopping (docs/trainer.md, "Evaluation,
# best model, early stopping"), through the trainer binary:
#  - train.eval_strategy steps: metrics.jsonl has an evaluation at every multiple of
#    train.eval_steps and at the last step (the final weights), and at no other step; with
#    `no`, at the last step only;
#  - early stopping: training ends at the step the evaluations in metrics.jsonl imply under HF's
#    rules (patience, threshold), recomputed here from the file, before train.max_steps;
#  - train.load_best_model_at_end: the best evaluation (recomputed from metrics.jsonl) is the
#    one named as exported, its checkpoint survives keep_checkpoints 1, the printed figure names
#    its step, and `predict` with final/ scores exactly that evaluation's accuracy;
#  - two ranks (Gloo) agree: both stop at the step their evaluations imply and export the best.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A task the tiny model learns in a few dozen steps and then overfits (15% of the labels
# flipped; tests/lib/eval_best_data.py).
"$T" gen-data --out "$work/data" --train 320 --dev 60 --seed 5 >/dev/null
"$PY" "$here/lib/eval_best_data.py" "$work/data"

job() {  # $1 = name, $2 = train keys, $3 = output keys
  cat >"$work/$1.yaml" <<YAML
name: evalbest-$1
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {global_batch_size: 16, micro_batch_size: 16, seed: 7, lr: 6.0e-3, $2}
output: {dir: out-$1, $3}
YAML
  "$T" train --config "$work/$1.yaml" >"$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "$1 did not train"; }
}

# 320 rows / 16 = 20 steps an epoch; 45 steps: evaluations at multiples of 7 and at 45 (the
# final weights), none at the epoch ends 20 and 40.
job steps "max_steps: 45, eval_strategy: steps, eval_steps: 7" "checkpoint_every_steps: 0"
"$PY" - "$work/out-steps/metrics.jsonl" <<'PY' || fail "evaluation steps"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l["step"] for l in lines if "loss" in l]
evals = [l["step"] for l in lines if "eval_loss" in l]
last = max(steps)
assert last == 45, last
want = sorted({s for s in steps if s % 7 == 0} | {last})
assert evals == want, f"evaluations at {evals}, want {want}"
print(f"ok   eval_steps 7 over {last} steps: evaluations at {evals}")
PY

# eval_strategy no: only the final weights are evaluated (none at the epoch ends 20 and 40).
job none "max_steps: 45, eval_strategy: no" "checkpoint_every_steps: 0"
"$PY" - "$work/out-none/metrics.jsonl" <<'PY' || fail "eval_strategy no"
import json, sys
evals = [l["step"] for l in map(json.loads, open(sys.argv[1])) if "eval_loss" in l]
assert evals == [45], f"evaluations at {evals}, want only the final weights' at 45"
print(f"ok   eval_strategy no: evaluations at {evals}")
PY

# Early stopping: eval_loss, patience 5, threshold 0.05 (smaller improvements count as none),
# evaluated every 4 steps of 120.
job early "max_steps: 120, eval_strategy: steps, eval_steps: 4, early_stopping_patience: 5, early_stopping_threshold: 0.05" "checkpoint_every_steps: 0"
# $1 = output dir, $2 = a log with the trainer's output, $3 = 1: some evaluation must have
# reset the count (the single-rank run, whose trajectory this test was tuned on)
check_early() {
"$PY" - "$1/metrics.jsonl" "$2" "$3" <<'PY' || fail "early stopping ($1)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l["step"] for l in lines if "loss" in l]
evals = [(l["step"], l["eval_loss"]) for l in lines if "eval_loss" in l]
# HF's EarlyStoppingCallback over eval_loss (lower is better): the count resets when the loss
# beats the best by more than the threshold, else it grows; stop when it reaches the patience.
best, count, stop = None, 0, None
for step, v in evals:
    if best is None or (v < best and abs(v - best) > 0.05):
        count = 0
    else:
        count += 1
    if best is None or v < best:
        best = v
    if count >= 5:
        stop = step
        break
assert stop is not None, f"the evaluations never exhaust the patience: {evals}"
assert stop < 120, stop
resets = sum(1 for i in range(1, len(evals)) if evals[i][1] < min(v for _, v in evals[:i]) - 0.05)
assert resets >= 1 or sys.argv[3] != "1", f"no evaluation reset the count before the stop: {evals}"
assert max(steps) == stop, f"trained to step {max(steps)}, early stopping says {stop}: {evals}"
assert evals[-1][0] == stop, f"evaluations after the stop: {evals}"
log = open(sys.argv[2]).read()
assert f"early stopping at step {stop} of 120" in log, log
assert f"early stopping ended training at step {stop}" in log, log
print(f"ok   early stopping at step {stop} of 120, as the evaluations imply: {evals}")
PY
}
check_early "$work/out-early" "$work/early.log" 1

# Run again, an early-stopped run is finished: nothing trained, metrics.jsonl unchanged.
cp "$work/out-early/metrics.jsonl" "$work/early.metrics"
"$T" train --config "$work/early.yaml" >"$work/early2.log" 2>&1 || { cat "$work/early2.log"; fail "rerun"; }
grep -q "training already finished" "$work/early2.log" || { cat "$work/early2.log"; fail "an early-stopped run was not finished"; }
cmp -s "$work/early.metrics" "$work/out-early/metrics.jsonl" || fail "the rerun changed metrics.jsonl"
echo "ok   an early-stopped run run again is finished"

# The best model: eval_accuracy every 4 steps of 120 (it overfits: the last is not the best),
# keep_checkpoints 1.
job best "max_steps: 120, eval_strategy: steps, eval_steps: 4, metric_for_best_model: accuracy, load_best_model_at_end: true" "checkpoint_every_steps: 0, keep_checkpoints: 1"
"$T" predict --model "$work/out-best/final" --input "$work/data/dev.tsv" --max-len 32 \
  >"$work/best.pred" || fail "predict"
"$PY" - "$work" <<'PY' || fail "best model"
import json, math, os, sys
w = sys.argv[1]
lines = [json.loads(l) for l in open(f"{w}/out-best/metrics.jsonl")]
evals = [(l["step"], l["eval_accuracy"]) for l in lines if "eval_loss" in l]
losses = {l["step"]: l["eval_loss"] for l in lines if "eval_loss" in l}
last = max(l["step"] for l in lines if "loss" in l)
best_step, best = None, None
for step, acc in evals:  # strictly better replaces, as HF's Trainer
    if best is None or acc > best:
        best_step, best = step, acc
named = [l for l in lines if "best_model_step" in l]
assert len(named) == 1 and named[0]["best_model_step"] == best_step, (named, evals)
assert named[0]["metric_for_best_model"] == "eval_accuracy", named
assert os.path.isdir(f"{w}/out-best/checkpoints/step-{best_step:08d}"), \
    os.listdir(f"{w}/out-best/checkpoints")
log = open(f"{w}/best.log").read()
assert f"step {best_step}, the exported model: the best evaluation by eval_accuracy of {last} steps" in log, log
with open(f"{w}/data/dev.tsv") as f:
    rows = [l.rstrip("\n").split("\t") for l in f][1:]
with open(f"{w}/best.pred") as f:
    pred = [l.rstrip("\n").split("\t") for l in f]
if pred and pred[0][0] == "label":
    pred = pred[1:]
assert len(pred) == len(rows), (len(pred), len(rows))
acc = sum(p[0] == r[1] for p, r in zip(pred, rows)) / len(rows)
assert abs(acc - best) < 1e-9, f"predict scores {acc}, the best evaluation (step {best_step}) {best}"
last_acc = [a for s, a in evals if s == last][0]
assert best_step != last and last_acc != best, f"the last model is the best: {evals}"
# The exact weights: the mean cross-entropy of predict's logits is the best step's eval_loss
# (another step with the same accuracy has another loss).
def ce(p, y):
    z = [float(x) for x in p[1:]]
    m = max(z)
    return m + math.log(sum(math.exp(x - m) for x in z)) - z[int(y)]
loss = sum(ce(p, r[1]) for p, r in zip(pred, rows)) / len(rows)
assert abs(loss - losses[best_step]) < 1e-4, f"predict's loss {loss}, step {best_step}'s {losses[best_step]}"
print(f"ok   best model: step {best_step} of {last} (eval_accuracy {best:.4f}; the last step's "
      f"{last_acc:.4f}); predict with final/ scores {acc:.4f}, loss {loss:.5f} (step "
      f"{best_step}'s eval_loss {losses[best_step]:.5f}); its checkpoint kept with "
      f"keep_checkpoints 1: {sorted(os.listdir(f'{w}/out-best/checkpoints'))}")
PY
# Two ranks: every rank stops at the step rank 0's metrics.jsonl implies, and exports the best.
for name in early best; do
  sed "s/dir: out-$name,/dir: out-$name-2r,/" "$work/$name.yaml" >"$work/$name-2r.yaml"
  launch_ranks 2 1 "$work/$name-2r.yaml" "$work/$name-2r"
  wait_ranks || { cat "$work/$name-2r"-*.log; fail "$name on 2 ranks"; }
done
cat "$work/early-2r-0.log" "$work/early-2r-1.log" >"$work/early-2r.log"
check_early "$work/out-early-2r" "$work/early-2r.log" 0
"$PY" - "$work" <<'PY' || fail "2 ranks"
import json, sys
w = sys.argv[1]
for name in ("early", "best"):
    lines = [json.loads(l) for l in open(f"{w}/out-{name}-2r/metrics.jsonl")]
    last = max(l["step"] for l in lines if "loss" in l)
    ranks = [json.load(open(f"{w}/out-{name}-2r/ranks/rank-{r}.json"))["steps"] for r in (0, 1)]
    assert ranks == [last, last], f"{name}: ranks ended at steps {ranks}, metrics.jsonl at {last}"
evals = [(l["step"], l["eval_accuracy"]) for l in map(json.loads, open(f"{w}/out-best-2r/metrics.jsonl")) if "eval_loss" in l]
best_step = max(evals, key=lambda e: (e[1], -e[0]))[0]
named = [json.loads(l) for l in open(f"{w}/out-best-2r/metrics.jsonl") if "best_model_step" in l]
assert named and named[-1]["best_model_step"] == best_step, (named, evals)
print(f"ok   2 ranks: both end where metrics.jsonl does; best step {best_step} exported")
PY

# Run again, the finished run names the best model's step, not the last.
"$T" train --config "$work/best.yaml" >"$work/best2.log" 2>&1 || { cat "$work/best2.log"; fail "rerun best"; }
best_step=$("$PY" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["best_model_step"])' "$work/out-best/metrics.jsonl")
grep -q "(step $best_step, the exported model" "$work/best2.log" || { cat "$work/best2.log"; fail "the rerun does not name step $best_step"; }
echo "ok   the finished best-model run run again names step $best_step"
echo "PASS"
