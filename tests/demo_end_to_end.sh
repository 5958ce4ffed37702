#!/usr/bin/env bash
# ctest-labels: integration;slow
# The README's main job, as scripts/demo.sh runs it: `ringmaster local` with no job file runs the
# embedded demo through a coordinator and two agents (one CPU rank each); it trains from scratch
# on the generated data, reaches >= 90% dev accuracy, and exports a model that `predict` and
# transformers agree on.
set -euo pipefail
T=${TRAINER:?}
CLI=${RINGMASTER_BINARY_DIR:?}/cli/ringmaster
[[ -x $CLI ]] || { echo "SKIP: $CLI not built (no gRPC)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$CLI" local --nodes 2 --procs-per-node 1 --trainer "$T" >"$work/train.out" 2>"$work/train.log" ||
  { tail -5 "$work/train.out"; tail -20 "$work/train.log"; exit 1; }
tail -1 "$work/train.out"
cat "$work/train.log"
acc=$(sed -n 's/.*dev accuracy \([0-9.]*\) (eval loss.*/\1/p' "$work/train.log")
[[ -n $acc ]] || { echo "no dev accuracy printed"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }' || { echo "dev accuracy $acc < 0.90"; exit 1; }
[[ -f runs/demo/final/model.safetensors && -f runs/demo/final/config.json && -f runs/demo/final/vocab.txt ]] ||
  { echo "export incomplete"; ls runs/demo/final; exit 1; }

"$T" predict --model runs/demo/final --input runs/demo/data/dev.tsv --output pred.tsv --max-len 64
# Accuracy recomputed from predict's output must agree with what training reported.
pred_acc=$(paste <(tail -n +2 pred.tsv | cut -f1) <(tail -n +2 runs/demo/data/dev.tsv | cut -f2) |
  awk '{ n++; if ($1 == $2) c++ } END { printf "%.4f", c / n }')
[[ $pred_acc == "$acc" ]] || { echo "predict accuracy $pred_acc != training's $acc"; exit 1; }

py=${RINGMASTER_PYTHON:-}
if [[ -n $py ]] && "$py" -c 'import torch, transformers' 2>/dev/null; then
  "$py" "$RINGMASTER_SOURCE_DIR/tests/oracle/hf_predict_check.py" --model runs/demo/final \
    --input runs/demo/data/dev.tsv --ours pred.tsv --max-len 64
else
  echo "note: transformers not available; export not cross-checked"
fi
echo "ok: demo dev accuracy $acc"
