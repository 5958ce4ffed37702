#!/usr/bin/env bash
# ctest-labels: faults;integration
# Disk full during a checkpoint (docs/reliability.md, "Fault scenarios"). The job's output dir
# is a tmpfs sized for about 1.5 checkpoints plus the other outputs, so the step-4 checkpoint
# fits and the step-8 one runs out of space. Expected: the trainer exits non-zero with an error
# naming the checkpoint and "No space left on device"; step 4 stays complete (manifest and every
# shard); no step-8 directory (manifest or not) and no temporary directory is left; a copy
# resumed elsewhere continues from step 4 with the losses of an uninterrupted run (1e-5
# relative). Needs root to mount a tmpfs: exit 77 (skip) otherwise.
set -euo pipefail
T=${TRAINER:?}
[[ $(id -u) -eq 0 ]] || { echo "skip: mounting a tmpfs needs root"; exit 77; }
work=$(mktemp -d)
mnt=$work/small
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt"; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$T" gen-data --out "$work/data" --train 400 --dev 100 --seed 11 >/dev/null

write_job() {  # $1 = output dir (absolute), $2 = job file
  cat >"$2" <<YAML
name: disk-full
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: $work/data/vocab.txt
data: {train: $work/data/train.tsv, eval: $work/data/dev.tsv, max_seq_len: 48}
train: {max_steps: 12, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3, seed: 3}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 1}
YAML
}
# "step loss" per training step of a run's metrics.jsonl.
losses() { sed -n 's/.*"loss":\([^,}]*\).*"step":\([0-9]*\).*/\2 \1/p' "$1/metrics.jsonl"; }

# Reference: the uninterrupted run, and the size of one checkpoint.
write_job "$work/ref" "$work/ref.yaml"
"$T" train --config "$work/ref.yaml" >/dev/null 2>"$work/ref.log"
ckpt=$work/ref/checkpoints/step-00000012
[[ -f $ckpt/manifest.json ]] || { echo "reference run wrote no checkpoint"; cat "$work/ref.log"; exit 1; }
ckpt_kib=$(du -sk "$ckpt" | cut -f1)
rest_kib=$(du -sk --exclude=checkpoints --exclude=final "$work/ref" | cut -f1)
size_kib=$((ckpt_kib * 3 / 2 + rest_kib + 16))
mkdir -p "$mnt"
mount -t tmpfs -o "size=${size_kib}k,mode=0700" tmpfs "$mnt" ||
  { echo "skip: cannot mount a tmpfs here"; exit 77; }
echo "one checkpoint ${ckpt_kib} KiB, other outputs ${rest_kib} KiB: tmpfs of ${size_kib} KiB"

# The run that fills the disk.
write_job "$mnt/out" "$work/full.yaml"
set +e
"$T" train --config "$work/full.yaml" >/dev/null 2>"$work/full.log"
rc=$?
set -e
fail() { echo "FAIL: $*"; echo "--- trainer log:"; cat "$work/full.log"; ls -laR "$mnt/out"; exit 1; }
[[ $rc -ne 0 ]] || fail "the trainer succeeded on a full disk"
[[ $rc -ne 3 ]] || fail "exit code 3 (bad job): a full disk is not the job's fault"
[[ $rc -lt 128 ]] || fail "the trainer died of a signal (exit $rc)"
err=$(grep 'error:' "$work/full.log" || true)
grep -q 'checkpoint .*step-00000008' <<<"$err" || fail "the error does not name the checkpoint"
grep -q 'No space left on device' <<<"$err" || fail "the error does not say No space left"
echo "trainer exit $rc: $err"

# The previous checkpoint is intact; nothing of the failed one remains.
cdir=$mnt/out/checkpoints
[[ -f $cdir/step-00000004/manifest.json ]] || fail "step-4 manifest missing"
for shard in "$work"/ref/checkpoints/step-00000012/shard-*.safetensors; do
  [[ -f $cdir/step-00000004/$(basename "$shard") ]] || fail "step-4 lacks $(basename "$shard")"
done
[[ ! -e $cdir/step-00000008 ]] || fail "a step-8 directory was left"
leftover=$(find "$cdir" -maxdepth 1 -name '.tmp-*' -o -maxdepth 1 -name '*.old-*')
[[ -z $leftover ]] || fail "temporary directories left: $leftover"

# Resumed from a copy on a normal disk: continues from step 4 like the uninterrupted run.
cp -r "$mnt/out" "$work/resumed"
write_job "$work/resumed" "$work/resumed.yaml"
"$T" train --config "$work/resumed.yaml" >/dev/null 2>"$work/resumed.log" ||
  { echo "FAIL: resume failed"; cat "$work/resumed.log"; exit 1; }
grep -q 'resumed from .*step-00000004' "$work/resumed.log" ||
  { echo "FAIL: did not resume from step 4"; cat "$work/resumed.log"; exit 1; }
join <(losses "$work/ref" | sort -k1,1) <(losses "$work/resumed" | sort -k1,1) | sort -n |
  awk 'BEGIN { n = 0; bad = 0 }
       { n++; d = $2 - $3; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2;
         if (d > 1e-5 * s) { bad++; print "step " $1 ": loss " $3 " vs uninterrupted " $2 }
         if ($1 == 5) printf "step 5 loss %s, uninterrupted %s\n", $3, $2 }
       END { if (n != 12 || bad) { print "FAIL: " n " steps compared, " bad " differ"; exit 1 } }'
echo "ok: full disk during a checkpoint fails cleanly and the previous checkpoint resumes"
