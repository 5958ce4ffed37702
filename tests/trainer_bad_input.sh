#!/usr/bin/env bash
# ctest-labels: integration
# Bad input through the real binary: a one-line error naming the file and the problem, a
# non-zero exit (not a crash), and no half-written output.
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# expect_error NAME PATTERN -- command...: exit 1 or 2, stderr one line matching PATTERN.
# `train` with a wrong job (spec, files, data) must exit 3: restarting it cannot help.
expect_error() {
  local name=$1 pattern=$2
  shift 3
  "$@" >"$work/stdout" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(grep -v ' INFO ringmaster-trainer: ' "$work/err" | grep -c .)  # info lines before the error do not count
  local want="1|2"
  [[ $2 == train ]] && want=3
  if ! [[ $rc =~ ^($want)$ ]] || ! grep -qE -- "$pattern" "$work/err" || [[ $lines -ne 1 && $rc -ne 2 ]]; then
    echo "FAIL $name: rc=$rc, stderr:"; sed 's/^/    /' "$work/err"; fail=1
  else
    echo "ok   $name: $(head -c 160 "$work/err")"
  fi
}

"$T" gen-data --out "$work/data" --train 64 --dev 16 --seed 3 >/dev/null
cat >"$work/job.yaml" <<'YAML'
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
"$T" train --config "$work/job.yaml" >/dev/null 2>&1 || { echo "FAIL: baseline job did not train"; exit 1; }
model="$work/out/final"

# Job YAML.
sed 's/lr: 1.0e-3/lrr: 1.0e-3/' "$work/job.yaml" >"$work/typo.yaml"
expect_error "unknown YAML key" "typo.yaml:6:.*unknown key 'train.lrr'" -- "$T" train --config "$work/typo.yaml"
sed 's/lr: 1.0e-3/lr: fast/' "$work/job.yaml" >"$work/type.yaml"
expect_error "mistyped YAML value" "type.yaml:6:.*train.lr" -- "$T" train --config "$work/type.yaml"
expect_error "missing job file" "nope.yaml" -- "$T" train --config "$work/nope.yaml"
sed 's/lr: 1.0e-3}/lr: 1.0e-3, precision: bf16}/' "$work/job.yaml" >"$work/bf16.yaml"
expect_error "bf16 on the CPU" "bf16.yaml: train.precision: bf16 needs train.device: cuda" -- \
  "$T" train --config "$work/bf16.yaml"
# device auto resolves to the CPU here; NCCL cannot carry a CPU rank's collectives (and may not
# be built): an error naming the setting, not a silent fall-back to Gloo.
sed 's/lr: 1.0e-3}/lr: 1.0e-3, device: auto}/' "$work/job.yaml" >"$work/nccl.yaml"
echo 'distributed: {backend: nccl}' >>"$work/nccl.yaml"
expect_error "nccl on a CPU rank" "nccl.yaml: distributed.backend: nccl" -- "$T" train --config "$work/nccl.yaml"
# The coordinator's plan for a rank (RINGMASTER_PRECISION) that this CPU trainer cannot run:
# a bad job (exit 3) naming the variable and the device, before any rendezvous.
for p in bf16 fp16; do
  RINGMASTER_PRECISION=$p expect_error "plan's $p on a CPU rank" \
    "RINGMASTER_PRECISION=$p .*needs a CUDA device.*train.device: cpu" -- \
    "$T" train --config "$work/job.yaml"
done

# TSV rows.
printf 'sentence\tlabel\ngood\t1\nbad\n' >"$work/data/missing.tsv"
printf 'sentence\tlabel\ngood\t1\nbad\t7\n' >"$work/data/range.tsv"
printf 'sentence\tlabel\ngood\t1\nb\xffd\t0\n' >"$work/data/utf8.tsv"
for f in missing range utf8; do
  sed "s#train: data/train.tsv#train: data/$f.tsv#" "$work/job.yaml" >"$work/$f.yaml"
done
expect_error "TSV row without label" "missing.tsv:3:" -- "$T" train --config "$work/missing.yaml"
expect_error "TSV label out of range" "range.tsv:3:.*out of range" -- "$T" train --config "$work/range.yaml"
expect_error "TSV invalid UTF-8" "utf8.tsv:3:.*UTF-8" -- "$T" train --config "$work/utf8.yaml"

# Vocab without [CLS].
grep -v '^\[CLS\]$' "$work/data/vocab.txt" >"$work/data/nocls.txt"
expect_error "vocab without [CLS]" "nocls.txt.*\[CLS\]" -- "$T" tokenize --vocab "$work/data/nocls.txt"

# Model directories: predict must fail cleanly and write no output file.
bad_model() {  # $1 = name; prints the new dir
  rm -rf "$work/m_$1"; cp -r "$model" "$work/m_$1"; echo "$work/m_$1"
}
m=$(bad_model missing); rm "$m/model.safetensors"
expect_error "missing safetensors" "model.safetensors" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_missing.tsv"
m=$(bad_model trunc); head -c 4 "$model/model.safetensors" >"$m/model.safetensors"
expect_error "truncated safetensors" "model.safetensors.*(truncated|short)" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_trunc.tsv"
m=$(bad_model cut); size=$(stat -c %s "$model/model.safetensors"); head -c $((size - 100)) "$model/model.safetensors" >"$m/model.safetensors"
expect_error "safetensors data cut short" "model.safetensors" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_cut.tsv"
m=$(bad_model hdr); { printf '\xff\xff\xff\xff\xff\xff\x00\x00'; tail -c +9 "$model/model.safetensors"; } >"$m/model.safetensors"
expect_error "bad header length" "model.safetensors.*header" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_hdr.tsv"
m=$(bad_model shape); sed -i 's/"hidden_size": 16/"hidden_size": 24/' "$m/config.json"
expect_error "shape disagrees with config.json" "model.safetensors.*shape" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_shape.tsv"
m=$(bad_model cfg); grep -v '"num_hidden_layers"' "$model/config.json" >"$m/config.json"
expect_error "missing config field" "config.json.*num_hidden_layers" -- "$T" predict --model "$m" --input "$work/data/dev.tsv" --output "$work/pred_cfg.tsv"
if ls "$work"/pred_*.tsv* >/dev/null 2>&1; then echo "FAIL: a failed predict left output: $(ls "$work"/pred_*)"; fail=1; fi

# Good path for comparison: predict writes its header and one line per row.
"$T" predict --model "$model" --input "$work/data/dev.tsv" --output "$work/pred_ok.tsv" || fail=1
[[ $(wc -l <"$work/pred_ok.tsv") -eq 17 ]] || { echo "FAIL: predict wrote $(wc -l <"$work/pred_ok.tsv") lines for a header and 16 rows"; fail=1; }

exit $fail
