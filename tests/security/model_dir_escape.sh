#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 2: what a model directory's own files name must stay inside the agent's
# --allowed-root. A sentence-transformers modules.json in a folder under the root named
# {"type": "sentence_transformers.models.Transformer", "path": "../../outside/secretmodel/final"}:
# the job succeeded, reading the model from outside and exporting its vocabulary and fine-tuned
# weights into final/ (the agent checks only the entries inside model.init_from). Now the
# trainer refuses, where it opens them, an entry that is absolute or has a '..', and any file
# or folder of the model that resolves outside the root (a link out), with exit 3 (no restart)
# and an error naming the file and the entry; nothing is exported. Cases, the trainer run as
# the agent runs it (RINGMASTER_ALLOWED_ROOT set):
#   dotdot   modules.json path "../../outside/secretmodel/final"
#   linkdir  modules.json path "a/b/c", c a link to the outside model (deeper than the agent
#            looks)
#   linkfile the transformer folder inside the root, its vocab.txt a link to a file outside
#   index    model.safetensors.index.json whose weight_map names a shard outside (refused, as
#            only a single model.safetensors is read; this one also held before the fix)
# and the dotdot case through a real coordinator and agent: the job Fails, 0 restarts spent,
# no final/. A model directory inside the root (modules.json path "") still fine-tunes.
# Before the fix dotdot, linkdir and linkfile succeeded and exported the outside model.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
root=$work/root outside=$work/outside
mkdir -p "$root" "$outside"
T=${TRAINER:?}

# The secret model, outside the root: a tiny model trained by the trainer alone (its final/).
"$T" gen-data --out "$root/data" --train 32 --dev 8 --seed 3 >/dev/null
cat >"$outside/make.yaml" <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: $root/data/vocab.txt
data: {train: $root/data/train.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: 1, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3}
output: {dir: secretmodel, checkpoint_every_steps: 0}
YAML
"$T" train --config "$outside/make.yaml" >"$work/make.log" 2>&1 || fail "no model made: $(tail -5 "$work/make.log")"
secret=$outside/secretmodel/final
[[ -f $secret/model.safetensors && -f $secret/vocab.txt ]] || fail "the export lacks files"

st() {  # DIR PATH: DIR/modules.json naming a Transformer module at PATH
  mkdir -p "$1"
  printf '[{"idx": 0, "name": "0", "path": "%s", "type": "sentence_transformers.models.Transformer"}]\n' \
    "$2" >"$1/modules.json"
}
job() {  # NAME INIT_FROM: $root/NAME.yaml fine-tuning INIT_FROM for one step into out-NAME
  cat >"$root/$1.yaml" <<YAML
model: {init_from: $2}
data: {train: data/train.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: 1, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3}
output: {dir: out-$1, checkpoint_every_steps: 0}
YAML
}
# refused NAME PATTERN: the trainer, confined to the root, exits 3 saying PATTERN; no final/.
refused() {
  local rc=0 bad=0
  (cd "$root" && RINGMASTER_ALLOWED_ROOT=$root timeout 120 "$T" train --config "$1.yaml") \
    >"$work/$1.out" 2>"$work/$1.err" || rc=$?
  if ((rc != 3)) || ! grep -qE -- "$2" "$work/$1.err"; then
    echo "FAIL $1: exit $rc (3 expected), or the error does not say: $2; stderr:"
    grep -v ' INFO ' "$work/$1.err" | tail -3 || true
    bad=1
  fi
  if [[ -e $root/out-$1/final ]]; then
    echo "FAIL $1: a model was exported to $root/out-$1/final"
    bad=1
  fi
  ((bad == 0)) || { failed=1; return 0; }
  echo "ok   $1: exit 3: $(grep -v ' INFO ' "$work/$1.err" | grep -oE "$2" | head -1)"
}
failed=0

st "$root/dotdot" "../../outside/secretmodel/final"
job dotdot dotdot
refused dotdot "dotdot/modules.json: module 0 \"path\" is '../../outside/secretmodel/final': it has a '\.\.' component"

st "$root/linkdir" "a/b/c"
mkdir -p "$root/linkdir/a/b"
ln -s "$secret" "$root/linkdir/a/b/c"
job linkdir linkdir
refused linkdir "linkdir/a/b/c \(named by .*linkdir/modules.json: module 0 \"path\"\) resolves to '$secret', outside the allowed root"

st "$root/linkfile" "0_Transformer"
cp -r "$secret" "$root/linkfile/0_Transformer"
ln -sf "$secret/vocab.txt" "$root/linkfile/0_Transformer/vocab.txt"
job linkfile linkfile
refused linkfile "linkfile/0_Transformer/vocab.txt resolves to '$secret/vocab.txt', outside the allowed root"

mkdir -p "$root/index"
cp "$secret/config.json" "$root/index/"
printf '{"metadata": {}, "weight_map": {"bert.embeddings.word_embeddings.weight": "../../outside/secretmodel/final/model.safetensors"}}\n' \
  >"$root/index/model.safetensors.index.json"
job index index
refused index "has model.safetensors.index.json but no model.safetensors"

# A model inside the root, modules.json naming the folder itself: fine-tunes as before.
st "$root/good" ""
cp "$secret"/* "$root/good/"
job good good
(cd "$root" && RINGMASTER_ALLOWED_ROOT=$root "$T" train --config good.yaml) >"$work/good.log" 2>&1 ||
  fail "the model inside the root did not fine-tune: $(tail -5 "$work/good.log")"
[[ -f $root/out-good/final/model.safetensors ]] || fail "the good job exported nothing"
echo "ok   good: a model inside the root fine-tunes"

((failed == 0)) || fail "the trainer read a model from outside the root (above)"

# The reported case through a real coordinator and an agent confined to the root.
start_coordinator
start_agent confined --allowed-root "$root" --throughput off
wait_until 30 "agent confined Ready" ready_nodes 1 || fail "the agent did not register"
echo "restart: {max_restarts: 2}" >>"$root/dotdot.yaml"
id=$(cd "$root" && "$CP_CLI" submit dotdot.yaml) || fail "submit failed"
wait_until 180 "job $id to end" job_ended "$id" || fail "job $id did not end"
"$CP_CLI" status "$id" >"$work/status.txt"
cat "$work/status.txt"
[[ $(job_field "$id" phase) == Failed ]] || fail "the job reading a model from outside did not fail"
[[ $(job_field "$id" restarts) == 0/2 ]] || fail "restarts were spent: $(job_field "$id" restarts)"
grep -q "modules.json: module 0" "$work/status.txt" || fail "the job's error does not name modules.json"
[[ ! -e $root/out-dotdot/final ]] || fail "the outside model was exported into $root/out-dotdot/final"
echo "ok   cluster: job $id Failed, 0 of 2 restarts, nothing exported"
echo "model_dir_escape: 1 passed, 0 failed"
