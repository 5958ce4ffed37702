#!/usr/bin/env bash
# ctest-labels: integration
# The emulator build's ringmaster-trainer (-DRINGMASTER_CUDA_EMU=ON, a test build: its CUDA engine
# runs on the CPU, hundreds of times slower than the CPU engine) runs train.device: cuda only
# where the test environment opts in with RINGMASTER_EMULATED_CUDA_OK=1 (issue #29). Without it
# (unset, or any other value) the job's `device: cuda`, `--device cuda` and a plan's
# RINGMASTER_DEVICE=cuda are refused before any work: exit 3 (a bad job), a message naming the
# emulator and the variable, no output written. `auto` takes the CPU. With it, the job runs on
# the CUDA engine and the log carries a warning line naming the emulator.
# Skips (77) unless the binary is an emulator build (--version: "CUDA engine: emulated").
set -euo pipefail
T=${TRAINER:?}
"$T" --version | grep -q "CUDA engine: emulated" ||
  { echo "SKIP: not an emulator build ($("$T" --version | grep -o 'CUDA engine: [^;]*'))"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$T" gen-data --out "$work/data" --train 64 --dev 16 --seed 5 >/dev/null
job() {  # job DEVICE OUT
  cat >"$work/$2.yaml" <<YAML
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {max_steps: 2, global_batch_size: 8, micro_batch_size: 8, seed: 3, device: $1,
        precision: fp32}
output: {dir: $2}
YAML
}
job cuda cuda
job cpu cpu
job auto auto

# refused NAME ARGS...: the trainer (without the opt-in unless NAME's caller set one) must exit 3
# with the emulator's message and write nothing.
refused() {
  local name=$1 rc=0
  shift
  "$@" >"$work/$name.log" 2>&1 || rc=$?
  ((rc == 3)) || { cat "$work/$name.log"; fail "$name: exit $rc, expected 3 (refused as a bad job)"; }
  grep -q "built with the CUDA emulator" "$work/$name.log" &&
    grep -q "RINGMASTER_EMULATED_CUDA_OK=1" "$work/$name.log" ||
    { cat "$work/$name.log"; fail "$name: no message naming the emulator and the opt-in"; }
  if grep -q "train.device: cuda: the CUDA engine (" "$work/$name.log"; then
    cat "$work/$name.log"
    fail "$name: the CUDA engine ran"
  fi
  echo "$name: refused (exit 3): $(grep -o 'train.device: cuda: this .*emulator[^,]*' "$work/$name.log" | head -1)"
}
refused job-device env -u RINGMASTER_EMULATED_CUDA_OK "$T" train --config "$work/cuda.yaml"
[[ ! -e $work/cuda ]] || fail "the refused job wrote $(ls "$work/cuda")"
refused opt-in-0 env RINGMASTER_EMULATED_CUDA_OK=0 "$T" train --config "$work/cuda.yaml"
refused flag env -u RINGMASTER_EMULATED_CUDA_OK "$T" train --config "$work/cpu.yaml" --device cuda
refused plan env -u RINGMASTER_EMULATED_CUDA_OK RINGMASTER_DEVICE=cuda "$T" train \
  --config "$work/auto.yaml"

# auto: the CPU engine, saying why.
env -u RINGMASTER_EMULATED_CUDA_OK "$T" train --config "$work/auto.yaml" >"$work/auto.log" 2>&1 ||
  { cat "$work/auto.log"; fail "auto without the opt-in"; }
grep -q "train.device auto: cpu (the only CUDA device is the CPU emulator's" "$work/auto.log" &&
  ! grep -q "train.device: cuda: the CUDA engine (" "$work/auto.log" || { cat "$work/auto.log"; fail "auto took the emulator"; }
echo "auto: $(grep -o 'train.device auto: cpu' "$work/auto.log")"

# With the opt-in: the CUDA engine runs, with the warning line.
RINGMASTER_EMULATED_CUDA_OK=1 "$T" train --config "$work/cuda.yaml" >"$work/ok.log" 2>&1 ||
  { cat "$work/ok.log"; fail "the opted-in run failed"; }
grep -q "train.device: cuda: the CUDA engine (fp32)" "$work/ok.log" ||
  { cat "$work/ok.log"; fail "the opted-in run is not the CUDA engine"; }
warning=$(grep "runs on the CUDA emulator" "$work/ok.log" || true)
[[ $warning == *WARN* || $warning == *warning* ]] || { cat "$work/ok.log"; fail "no warning line naming the emulator"; }
[[ -s $work/cuda/metrics.jsonl ]] || fail "the opted-in run wrote no metrics"
echo "opted in: ran; $warning"
echo "trainer_cuda_emulator_optin: passed"
