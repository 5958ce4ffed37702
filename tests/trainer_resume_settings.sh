#!/usr/bin/env bash
# ctest-labels: integration
# train.resume (docs/job-reference.md, "Resuming, starting over, finished runs"), through the
# trainer binary:
#  - a finished run started again trains nothing, says so and where its model is, exit 0, and
#    leaves metrics.jsonl, final/ and job.yaml as they were;
#  - resuming with a changed lr and global batch size is refused (exit 3) naming both keys with
#    their old and new values, and the run's job.yaml, checkpoints and metrics stay untouched;
#  - --resume (train.resume: force) resumes anyway, logging the differences;
#  - --overwrite and train.resume: never start over: the old run's metrics and checkpoints go;
#  - a changed micro_batch_size (how a global batch is split) still resumes.
set -euo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 200 --dev 40 --seed 3 >/dev/null
fail() { echo "FAIL: $*"; exit 1; }

job() {  # $1 = output dir name, $2 = lr, $3 = global batch, $4 = micro batch, $5 = extra train keys
  cat >"$work/$1.yaml" <<YAML
name: resume-settings
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {max_steps: 8, global_batch_size: $3, micro_batch_size: $4, lr: $2, seed: 11${5:-}}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 10}
YAML
  echo "$work/$1.yaml"
}
# Run a job; sets rc, and the output in $work/<name>.out.
run() {  # $1 = name (log), rest = trainer arguments
  local name=$1
  shift
  rc=0
  "$T" train "$@" >"$work/$name.out" 2>&1 || rc=$?
}
fingerprint() {  # what must not change in a refused or finished run: sums of its files
  (cd "$1" && find . -type f ! -name '*.lock' | sort | xargs sha256sum)
}

run a --config "$(job a 0.001 8 4)"
((rc == 0)) || { cat "$work/a.out"; fail "first run exited $rc"; }
[[ -f $work/a/final/model.safetensors ]] || fail "no final/ after the first run"

# 1. Finished: started again, nothing is trained or rewritten.
before=$(fingerprint "$work/a")
run a-again --config "$work/a.yaml"
((rc == 0)) || { cat "$work/a-again.out"; fail "a finished run started again exited $rc"; }
grep -q "training already finished: step 8 is the last" "$work/a-again.out" ||
  { cat "$work/a-again.out"; fail "a finished run does not say it is finished"; }
grep -q "model exported to $work/a/final" "$work/a-again.out" || fail "no model location"
grep -q "^dev accuracy .*(step 8, the exported model" "$work/a-again.out" ||
  { cat "$work/a-again.out"; fail "no final figure of step 8"; }
if grep -q "resumed from" "$work/a-again.out"; then fail "the finished run says it resumed"; fi
[[ $(fingerprint "$work/a") == "$before" ]] || fail "a finished run started again changed its files"
echo "ok   finished run: $(grep "^training already finished" "$work/a-again.out")"

# A run stopped after step 4: the copy keeps only the step-4 checkpoint.
interrupted() {  # $1 = new name
  cp -r "$work/a" "$work/$1"
  rm -rf "$work/$1/final" "$work/$1/checkpoints/step-00000008"
  sed -i '/"step":[5-8][,}]/d' "$work/$1/metrics.jsonl"
}

# 2. Changed lr and global batch size: refused, exit 3, both keys named, nothing written.
interrupted b
before=$(fingerprint "$work/b")
run b --config "$(job b 0.002 16 4)"
((rc == 3)) || { cat "$work/b.out"; fail "changed settings: exit $rc, expected 3"; }
err=$(grep "error:" "$work/b.out") || { cat "$work/b.out"; fail "no error line"; }
[[ $(wc -l <<<"$err") -eq 1 ]] || fail "the refusal is not one line: $err"
for want in "step-00000004 was written by a run with other settings" \
  "train.global_batch_size 8 -> 16" "train.lr 0.001 -> 0.002" "train.resume: force (or pass --resume)"; do
  grep -qF "$want" <<<"$err" || fail "the refusal lacks '$want': $err"
done
[[ $(fingerprint "$work/b") == "$before" ]] || fail "a refused run changed its output dir (job.yaml?)"
echo "ok   refused: $err"

# 3. --resume: resumes anyway, says what changed, and records the new job.
run b-force --config "$work/b.yaml" --resume
((rc == 0)) || { cat "$work/b-force.out"; fail "--resume exited $rc"; }
grep -q "train.resume: force: resuming .*step-00000004 .*train.lr 0.001 -> 0.002" "$work/b-force.out" ||
  { cat "$work/b-force.out"; fail "--resume did not log the differences"; }
grep -q "resumed from .*step-00000004" "$work/b-force.out" || fail "--resume did not resume"
grep -q "lr: 0.002" "$work/b/job.yaml" || fail "job.yaml does not record the resumed job"
echo "ok   --resume resumed from step 4 under the new settings"

# 4. --overwrite and train.resume: never: start over; the old run's lines and checkpoints go.
for how in flag yaml; do
  interrupted "c-$how"
  if [[ $how == flag ]]; then
    run "c-$how" --config "$(job "c-$how" 0.002 16 4)" --overwrite
  else
    run "c-$how" --config "$(job "c-$how" 0.002 16 4 ", resume: never")"
  fi
  ((rc == 0)) || { cat "$work/c-$how.out"; fail "start over ($how) exited $rc"; }
  grep -q "train.resume: never: starting over" "$work/c-$how.out" || fail "start over ($how) not said"
  if grep -q "resumed from" "$work/c-$how.out"; then fail "start over ($how) resumed"; fi
  steps=$(grep '"loss"' "$work/c-$how/metrics.jsonl" | grep -o '"step":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
  [[ $steps == "1 2 3 4 5 6 7 8 " ]] || fail "start over ($how): metrics steps '$steps'"
  grep -qF '"train.lr": "0.002"' "$work/c-$how/checkpoints/step-00000004/manifest.json" ||
    fail "start over ($how): step 4's checkpoint is not the new run's"
  echo "ok   start over ($how): 8 new steps"
done

# 5. micro_batch_size is not a trajectory setting: it resumes.
interrupted d
run d --config "$(job d 0.001 8 2)"
((rc == 0)) || { cat "$work/d.out"; fail "a changed micro_batch_size was refused (exit $rc)"; }
grep -q "resumed from .*step-00000004" "$work/d.out" || fail "a changed micro_batch_size did not resume"
echo "ok   changed micro_batch_size resumed from step 4"
echo "PASS"
