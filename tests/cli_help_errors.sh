#!/usr/bin/env bash
# ctest-labels: integration
# Help, version and actionable errors through the real binaries (issue #21 items 6 and 7):
#  - every binary and every command answers --help/-h (usage, each flag with "default:", exit 0)
#    and --version (the same version, a git revision of this repository, the CUDA and NCCL
#    build facts); flags work in any position and as --flag=value; a mistyped flag names the
#    nearest one;
#  - the CLI and the agent say what is wrong and which flag fixes it for an absent
#    coordinator, a TLS client at a plaintext coordinator and a plaintext client at a TLS one;
#  - a job with init_from naming a hub model, and one with several mistakes (reported at once,
#    each unknown key with the nearest known one).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
T=${TRAINER:?}
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
fail() { echo "FAIL: $*"; exit 1; }

# ---- --help and --version everywhere
check_help() {  # check_help WHAT FLAG... -- command...
  local what=$1
  shift
  local flags=()
  while [[ $1 != -- ]]; do flags+=("$1"); shift; done
  shift
  "$@" >"$work/help.out" 2>"$work/help.err" || fail "$what: exit $?: $(cat "$work/help.err")"
  grep -q "usage: " "$work/help.out" || fail "$what: no usage line"
  ((${#flags[@]} == 0)) || grep -q "default: " "$work/help.out" || fail "$what: no defaults"
  local f
  for f in "${flags[@]}"; do
    grep -q -- "^  $f\b" "$work/help.out" || fail "$what: $f not listed: $(cat "$work/help.out")"
  done
}
check_help "ringmaster --help" --coordinator --tls-ca --insecure-loopback -- "$CP_CLI" --help
check_help "ringmaster -h" --coordinator -- "$CP_CLI" -h
check_help "ringmaster help submit" --follow --coordinator -- "$CP_CLI" help submit
check_help "ringmaster submit --help" --follow --token-file -- "$CP_CLI" submit --help
check_help "ringmaster logs -h" --rank --bytes -- "$CP_CLI" logs -h
check_help "ringmaster local --help" --nodes --procs-per-node --gpus --keep -- "$CP_CLI" local --help
for c in status list cancel nodes; do
  check_help "ringmaster $c --help" --coordinator -- "$CP_CLI" "$c" --help
done
check_help "coordinator --help" --listen --db --lost-after --tls-client-ca -- "$CP_COORD" --help
check_help "agent -h" --coordinator --trainer --allowed-root --throughput -- "$CP_AGENT" -h
check_help "trainer --help" --config --model --vocab --seconds -- "$T" --help
check_help "trainer train --help" --config --device --resume --overwrite -- "$T" train --help
check_help "trainer predict --help" --model --input --max-len -- "$T" predict --help
check_help "trainer tokenize --help" --vocab --cased -- "$T" tokenize --help
check_help "trainer gen-data --help" --out --seed -- "$T" gen-data --help
check_help "trainer probe --help" --seconds -- "$T" probe --help
check_help "trainer print-default-job --help" -- "$T" print-default-job --help
"$T" predict --help | grep -A2 -- "--max-len" | grep -q "default: the length the model was trained with" || fail "predict --max-len default"
"$T" tokenize --help | grep -A2 -- "--max-len" | grep -q "default: 512" || fail "tokenize --max-len default"
echo "ok   --help: 4 binaries, every command, each flag with its default"

first=""
for b in "$CP_CLI" "$CP_COORD" "$CP_AGENT" "$T" "$CP_CLI submit" "$T train"; do
  # shellcheck disable=SC2086
  out=$($b --version) || fail "$b --version: exit $?"
  grep -q "CUDA engine: " <<<"$out" || fail "$b --version: no CUDA line: $out"
  grep -q "NCCL: " <<<"$out" || fail "$b --version: no NCCL line: $out"
  version=$(head -1 <<<"$out" | cut -d' ' -f2-)
  [[ -z $first || $version == "$first" ]] || fail "$b --version '$version' differs from '$first'"
  first=$version
done
rev=$(sed -n 's/.*(git \([^)]*\)).*/\1/p' <<<"$first")
rev=${rev%-dirty}
[[ -n $rev ]] || fail "no git revision in '$first'"
if git -C "${RINGMASTER_SOURCE_DIR:?}" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$RINGMASTER_SOURCE_DIR" cat-file -e "$rev^{commit}" 2>/dev/null ||
    fail "--version's revision $rev is not a commit of $RINGMASTER_SOURCE_DIR"
fi
echo "ok   --version: $first"

# ---- flags in any position, --flag=value, and mistakes
"$CP_CLI" submit job.yaml --folow >/dev/null 2>"$work/e" && fail "--folow accepted"
grep -q "unknown flag '--folow'; did you mean --follow?" "$work/e" || fail "no suggestion: $(cat "$work/e")"
"$CP_CLI" status j1 --follow >/dev/null 2>"$work/e" && fail "status --follow accepted"
grep -q -- "--follow is not a flag of 'status'" "$work/e" || fail "status --follow: $(cat "$work/e")"
"$CP_CLI" sumbit job.yaml >/dev/null 2>"$work/e"
[[ $? == 2 ]] || fail "an unknown command does not exit 2"
grep -q "did you mean 'submit'" "$work/e" || fail "no command suggestion: $(cat "$work/e")"
"$T" train --confg x.yaml >/dev/null 2>"$work/e" && fail "--confg accepted"
grep -q "did you mean --config" "$work/e" || fail "trainer: no suggestion: $(cat "$work/e")"
"$CP_COORD" --db x --listen >/dev/null 2>"$work/e" && fail "--listen without a value accepted"
grep -q -- "--listen needs a value" "$work/e" || fail "coordinator: $(cat "$work/e")"

start_coordinator
# Global flags after the command and in the = form; the plaintext coordinator from cluster_init.
env -u RINGMASTER_COORDINATOR -u RINGMASTER_INSECURE_LOOPBACK \
  "$CP_CLI" nodes --coordinator="127.0.0.1:$CP_PORT" --insecure-loopback >/dev/null 2>"$work/e" ||
  fail "flags after the command: $(cat "$work/e")"
env -u RINGMASTER_COORDINATOR -u RINGMASTER_INSECURE_LOOPBACK \
  "$CP_CLI" --insecure-loopback list --coordinator "127.0.0.1:$CP_PORT" >/dev/null 2>"$work/e" ||
  fail "flags around the command: $(cat "$work/e")"
"$T" gen-data --seed=3 --out="$work/data" --train 64 --dev=16 >/dev/null || fail "gen-data with ="
echo "ok   flags in any position and as --flag=value; mistyped flags and commands suggested"

# ---- errors a user can act on: CLI
expect_cli() {  # expect_cli WHAT PATTERN -- env/CLI arguments...
  local what=$1 pattern=$2
  shift 3
  env "$@" >/dev/null 2>"$work/e" && fail "$what: succeeded"
  grep -q -- "$pattern" "$work/e" || fail "$what: $(cat "$work/e")"
  [[ $(grep -c . "$work/e") == 1 ]] || fail "$what: more than one line: $(cat "$work/e")"
  echo "ok   $what: $(head -c 200 "$work/e")"
}
free_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
expect_cli "CLI, no coordinator" "no coordinator is listening at 127.0.0.1:$free_port.*--coordinator" \
  -- "$CP_CLI" --coordinator "127.0.0.1:$free_port" nodes
expect_cli "CLI, TLS to a plaintext coordinator" "speaks plaintext but this client uses TLS.*--insecure-loopback" \
  -- -u RINGMASTER_INSECURE_LOOPBACK "$CP_CLI" nodes

# ---- the agent (it retries; its log says why)
agent_says() {  # agent_says WHAT PATTERN AGENT-ARGS...
  local what=$1 pattern=$2
  shift 2
  "$CP_AGENT" --trainer "$T" --work-dir "$work/agent-$RANDOM" --inventory-override none \
    --throughput off "$@" >"$work/agent.log" 2>&1 &
  local pid=$!
  wait_until 30 "$what" grep -q -- "$pattern" "$work/agent.log" || { kill "$pid"; cat "$work/agent.log"; exit 1; }
  kill "$pid"
  wait "$pid" 2>/dev/null
  echo "ok   $what: $(grep -m1 -- "$pattern" "$work/agent.log" | head -c 200)"
}
agent_says "agent, no coordinator" "no coordinator is listening at 127.0.0.1:$free_port" \
  --coordinator "127.0.0.1:$free_port" --insecure-loopback
agent_says "agent, TLS to a plaintext coordinator" "speaks plaintext but this client uses TLS" \
  --coordinator "127.0.0.1:$CP_PORT"

# ---- plaintext to a TLS coordinator
cluster_stop
COORD_PID=""
cluster_tls
start_coordinator
expect_cli "CLI, plaintext to a TLS coordinator" "expects TLS. Drop --insecure-loopback" \
  -- -u RINGMASTER_TLS_CA -u RINGMASTER_TLS_CERT -u RINGMASTER_TLS_KEY "$CP_CLI" --insecure-loopback nodes
agent_says "agent, plaintext to a TLS coordinator" "expects TLS. Drop --insecure-loopback" \
  --coordinator "127.0.0.1:$CP_PORT" --insecure-loopback

# ---- job files
cat >"$work/hub.yaml" <<'YAML'
model: {init_from: bert-base-uncased, num_labels: 2}
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, global_batch_size: 16, micro_batch_size: 16}
output: {dir: out}
YAML
"$T" train --config "$work/hub.yaml" >/dev/null 2>"$work/e"
rc=$?
[[ $rc == 3 ]] || fail "init_from a hub name: exit $rc (want 3, a bad job): $(cat "$work/e")"
for p in "model.init_from: no directory at $work/bert-base-uncased" \
  "does not download from the Hugging Face hub" "save_pretrained('models/bert-base-uncased')"; do
  grep -qF -- "$p" "$work/e" || fail "init_from a hub name: no '$p' in $(cat "$work/e")"
done
echo "ok   init_from a hub name: $(head -c 200 "$work/e")"

cat >"$work/many.yaml" <<'YAML'
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_length: 32}
train: {epochs: 1, learning_rate: 1.0e-3, micro_batch_size: fast}
output: {dir: out}
YAML
"$T" train --config "$work/many.yaml" >/dev/null 2>"$work/e"
rc=$?
[[ $rc == 3 ]] || fail "a job with three mistakes: exit $rc: $(cat "$work/e")"
for p in "many.yaml:4:.*unknown key 'data.max_seq_length'; did you mean 'data.max_seq_len'?" \
  "many.yaml:5:.*unknown key 'train.learning_rate'; did you mean 'train.lr'?" \
  "many.yaml:5:.*train.micro_batch_size: expected"; do
  grep -q -- "$p" "$work/e" || fail "a job with three mistakes: no '$p' in $(cat "$work/e")"
done
echo "ok   three mistakes in one job file, reported at once with suggestions"
echo PASS
