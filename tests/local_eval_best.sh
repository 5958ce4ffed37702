#!/usr/bin/env bash
# ctest-labels: integration;serial
# `ringmaster local` (coordinator, two agents, a rank each) with a job that evaluates every 4
# steps, keeps the best model by accuracy and stops early (docs/trainer.md, "Evaluation, best model,
# early stopping"; tests/trainer_eval_best.sh covers the trainer binary alone):
#  - the job Succeeds through the coordinator with no restart, its last progress line at the
#    step early stopping implies (recomputed here from metrics.jsonl under HF's rules), before
#    train.max_steps, with that step's training loss; both ranks end at that step;
#  - final/ is the best evaluation's model: `predict` with it scores that evaluation's accuracy
#    and its mean cross-entropy is that step's eval_loss (not the last step's);
#  - the figure `ringmaster local` prints at the end names the best step and its metric.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
B=${RINGMASTER_BINARY_DIR:?}
here=$(cd "$(dirname "$0")" && pwd)
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/local.out" "$work/local.err" 2>/dev/null; exit 1; }
# The task of trainer_eval_best.sh, which the tiny model learns in a few dozen steps and then
# overfits (tests/lib/eval_best_data.py).
"$T" gen-data --out "$work/data" --train 320 --dev 60 --seed 5 >/dev/null
"$PY" "$here/lib/eval_best_data.py" "$work/data"
# Patience 5 on accuracy (greater is better, HF's default threshold 0): stops once five
# evaluations in a row do not beat the best. On 2 ranks the model plateaus first (an early stop
# after a smaller patience would come before it learns), then learns and overfits.
cat >"$work/job.yaml" <<YAML
name: local-eval-best
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {global_batch_size: 16, micro_batch_size: 16, seed: 7, lr: 6.0e-3, max_steps: 120,
        eval_strategy: steps, eval_steps: 4, metric_for_best_model: accuracy,
        load_best_model_at_end: true, early_stopping_patience: 5}
output: {dir: out, checkpoint_every_steps: 0, keep_checkpoints: 1}
distributed: {nodes: 2, procs_per_node: 1}
restart: {max_restarts: 2}
YAML

export RINGMASTER_COLLECTIVE_TIMEOUT_S=120
timeout 300 "$CLI" local "$work/job.yaml" --trainer "$T" >"$work/local.out" 2>"$work/local.err" ||
  fail "ringmaster local did not succeed"
cat "$work/local.out" "$work/local.err"
"$T" predict --model "$work/out/final" --input "$work/data/dev.tsv" --max-len 32 \
  >"$work/best.pred" || fail "predict"
"$PY" - "$work" <<'PY' || fail "the best-model run through ringmaster local"
import json, math, re, sys
w = sys.argv[1]
lines = [json.loads(l) for l in open(f"{w}/out/metrics.jsonl")]
steps = [l["step"] for l in lines if "loss" in l]
evals = [(l["step"], l["eval_accuracy"], l["eval_loss"]) for l in lines if "eval_loss" in l]
out = open(f"{w}/local.out").read()
err = open(f"{w}/local.err").read()
# HF's EarlyStoppingCallback on accuracy, threshold 0: the count resets on a strictly better
# accuracy, else grows; training stops at the evaluation where it reaches the patience (5).
# The best model (HF's Trainer): the first evaluation with the highest accuracy.
best, best_step, count, stop = None, None, 0, None
for step, acc, _ in evals:
    if best is None or acc > best:
        best, best_step, count = acc, step, 0
    else:
        count += 1
    if count >= 5:
        stop = step
        break
assert stop is not None and stop < 120, f"the evaluations do not stop training early: {evals}"
assert max(steps) == stop, f"trained to step {max(steps)}, early stopping says {stop}: {evals}"
assert evals[-1][0] == stop, f"evaluations after the stop at {stop}: {evals}"
assert sorted(set(steps)) == list(range(1, stop + 1)), "steps repeated or missing (a restart?)"
assert best > 0.8 and best_step != evals[0][0], f"stopped before the model learned: {evals}"
ranks = [json.load(open(f"{w}/out/ranks/rank-{r}.json"))["steps"] for r in (0, 1)]
assert ranks == [stop, stop], f"ranks ended at steps {ranks}, early stopping at {stop}"
# Through the coordinator: Succeeded at the stop step, not restarted or failed.
final = [l for l in out.splitlines() if "Succeeded" in l]
m = re.search(rf"Succeeded\s+step {stop}/120\s+loss ([0-9.]+)", final[-1]) if final else None
assert m, f"no Succeeded line at step {stop}: {final}"
# Its loss is the stop step's (not that of the last step the agent saw running).
step_loss = [l["loss"] for l in lines if "loss" in l and l["step"] == stop][0]
assert m.group(1) == f"{step_loss:.4f}", f"Succeeded line's loss {m.group(1)}, step {stop}'s {step_loss}"
status = re.findall(r"restarts (\d+)/2", out)
assert status and set(status) == {"0"}, f"restarted: {status}\n{out}"
named = [l for l in lines if "best_model_step" in l]
assert len(named) == 1 and named[0]["best_model_step"] == best_step, (named, evals)
# The last evaluation is not the best (at most ties it, as here: the first of equals is the
# best, as in HF's Trainer); its eval_loss differs, so predict's loss tells the two apart.
last_acc, last_loss = evals[-1][1], evals[-1][2]
assert best_step != stop and last_acc <= best, f"the last model is the best: {evals}"
assert abs(last_loss - dict((s, l) for s, _, l in evals)[best_step]) > 1e-2, evals
# The figure printed at the end: the best step's, named as such.
want = (f"dev accuracy {best:.4f} (eval loss {dict((s, l) for s, _, l in evals)[best_step]:.4f}, "
        f"step {best_step}, the best by eval_accuracy); model in ")
assert want in out + err, f"not printed: {want!r}\n{out}\n{err}"
# final/ is the best step's model: predict's accuracy and mean cross-entropy on the dev set.
with open(f"{w}/data/dev.tsv") as f:
    rows = [l.rstrip("\n").split("\t") for l in f][1:]
pred = [l.rstrip("\n").split("\t") for l in open(f"{w}/best.pred")]
if pred and pred[0][0] == "label":
    pred = pred[1:]
assert len(pred) == len(rows), (len(pred), len(rows))
acc = sum(p[0] == r[1] for p, r in zip(pred, rows)) / len(rows)
def ce(p, y):
    z = [float(x) for x in p[1:]]
    m = max(z)
    return m + math.log(sum(math.exp(x - m) for x in z)) - z[int(y)]
loss = sum(ce(p, r[1]) for p, r in zip(pred, rows)) / len(rows)
best_loss = dict((s, l) for s, _, l in evals)[best_step]
assert abs(acc - best) < 1e-9, f"predict scores {acc}, the best evaluation (step {best_step}) {best}"
assert abs(loss - best_loss) < 1e-4, f"predict's loss {loss}, step {best_step}'s {best_loss}"
print("evaluations (step, accuracy, loss):", evals)
print(f"ok   early stopping at step {stop} of 120 through the coordinator (Succeeded, no restart); "
      f"final/ is step {best_step}'s: predict scores {acc:.4f} (the last step's {last_acc:.4f}), "
      f"loss {loss:.5f} = its eval_loss {best_loss:.5f}; printed: {want.strip()}")
PY
echo "PASS"
