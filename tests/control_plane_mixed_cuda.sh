#!/usr/bin/env bash
# ctest-labels: integration;serial;gpu
# Mixed GPU generations on the CUDA engine (issue #19, item 5): two agents report a Tesla P40
# (sm_61) and an A100 (sm_80); a job with train.device: auto is planned onto both GPUs, and the
# two ranks train together over NCCL, each in the precision of its generation (fp32 on the P40,
# bf16 on the A100) and with the share of every global batch that the coordinator measured for
# it. Here the GPUs are the CUDA emulator's, each agent's trainer seeing the compute capability of
# its card (CUDA_EMU_CC), and NCCL is the emulator's stand-in. Checks: the job succeeds; each
# rank's log names the CUDA engine in its planned precision; the shares add up to the global
# batch; the loss curve stays within 2% of a single fp32 CPU process on the same global batch
# (bf16 GEMMs on one rank). Skips (77) without the CUDA engine or NCCL in the trainer.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 160 --dev 16 --seed 9 >/dev/null
job() {  # $1 = output dir, $2 = device
  cat >"$work/$1.yaml" <<YAML
name: mixed-cuda
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: 6, global_batch_size: 16, micro_batch_size: 16, lr: 2.0e-3,
        warmup_steps: 1, seed: 13, device: $2}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {sharding: full_shard, compression: none, nodes: 2, procs_per_node: 1}
YAML
  echo "$work/$1.yaml"
}
"$T" train --config "$(job ref cpu)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
# The trainer must have the CUDA engine and NCCL (the emulator build links its stand-in).
if ! RINGMASTER_DEVICE=cuda "$T" train --config "$(job probe cuda)" >"$work/probe.log" 2>&1; then
  if grep -qE "not available in this build|no usable CUDA device|no CUDA-capable device" "$work/probe.log"; then
    echo "SKIP: $(tail -1 "$work/probe.log")"
    exit 77
  fi
  cat "$work/probe.log"; exit 1
fi
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }

export OMP_NUM_THREADS=1 RINGMASTER_COLLECTIVE_TIMEOUT_S=120
start_coordinator --lost-after 10s --last-call 1s
speed_of() { "$CP_CLI" nodes | awk -v n="$1" '$1 == n && $7 != "-" { print $7 }'; }
registered() { [[ -n $(speed_of "$1") ]]; }
CUDA_EMU_CC=6.1 start_agent p40 --inventory-override '1xTesla P40:sm_61:24GiB'
wait_until 120 "p40 registered with a throughput" registered p40 || on_fail "p40 did not register"
CUDA_EMU_CC=8.0 start_agent a100 --inventory-override '1xNVIDIA A100-SXM4-40GB:sm_80:40GiB'
wait_until 120 "a100 registered with a throughput" registered a100 || on_fail "a100 did not register"

id=$("$CP_CLI" submit "$(job out auto)")
wait_until 600 "the job to end" bash -c "[[ \$('$CP_CLI' status $id | sed -n 's/^phase: *//p') =~ Succeeded|Failed|Cancelled ]]" ||
  on_fail "the job did not end"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "the job did not succeed"
fail=0
engine_line() { grep -ho "train.device: cuda: the CUDA engine ([a-z0-9]*)" "$work/$1"/jobs/"$id"/gen-0/rank-*.log; }
p40=$(engine_line p40 || true) a100=$(engine_line a100 || true)
echo "p40 rank: ${p40:-no CUDA engine line}; a100 rank: ${a100:-no CUDA engine line}"
[[ $p40 == *"(fp32)" ]] || { echo "FAIL: the P40 rank is not the CUDA engine in fp32"; fail=1; }
[[ $a100 == *"(bf16)" ]] || { echo "FAIL: the A100 rank is not the CUDA engine in bf16"; fail=1; }
share() { sed -n 's/.*rank [0-9]* takes \([0-9]*\) of every 16 samples.*/\1/p' "$work/$1"/jobs/"$id"/gen-0/rank-*.log; }
s_p40=$(share p40) s_a100=$(share a100)
echo "shares of a 16-sample global batch: a100 ${s_a100:-?}, p40 ${s_p40:-?}"
if [[ -n $s_p40 && -n $s_a100 ]] && ((s_p40 + s_a100 == 16 && s_p40 > 0 && s_a100 > 0)); then
  echo "ok   both ranks took their planned shares"
else
  echo "FAIL: shares do not add up to the global batch"; fail=1
fi
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl" | cut -d: -f2; }
if paste <(losses "$work/out") <(losses "$work/ref") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r }
  END { printf "mixed fp32+bf16 CUDA ranks vs one fp32 CPU process: max relative loss difference %.2e over %d steps\n", worst, n
        exit !(n == 6 && worst < 0.02) }'; then
  echo "ok   the mixed job follows the fp32 loss curve"
else
  echo "FAIL: the mixed job's loss curve"; fail=1
fi
((fail == 0)) || cluster_logs
exit $fail
