#!/usr/bin/env bash
# ctest-labels: integration
# Where `predict --output` and `gen-data --out` write (issue #33: `--output /dev/null` as root
# renamed a regular file over the machine's /dev/null). Through the real binary, on nodes made
# in a scratch directory only (never the real /dev/null or /dev/stdout):
#  - `--output -` is stdout, and no file named '-' appears;
#  - a FIFO is written in place (a reader started before gets every line) and stays a FIFO;
#  - a character device (mknod c 1 3, when running as root) stays a device;
#  - a link to /proc/self/fd/1 writes to stdout where it stands, and stays a link;
#  - a regular file is replaced by rename (a new inode; a reader polling it while a large
#    output is written sees the old content or the new, never part of one; no temporary left:
#    this part guards the atomic path the fix keeps, and passed before the fix too);
#  - a link is followed to its target, except below RINGMASTER_ALLOWED_ROOT (refused);
#  - gen-data writes a FIFO placed where one of its files goes in place too.
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
reader=
trap '[[ -n $reader ]] && kill "$reader" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok   $*"; }
cd "$work" || exit 1

"$T" gen-data --out data --train 64 --dev 16 --seed 3 >/dev/null || { echo "FAIL: gen-data"; exit 1; }
cat >job.yaml <<'YAML'
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
"$T" train --config job.yaml >/dev/null 2>&1 || { echo "FAIL: the model did not train"; exit 1; }
predict() { "$T" predict --model out/final --input data/dev.tsv "$@"; }
predict --output want.tsv || { echo "FAIL: predict to a new file"; exit 1; }
[[ $(wc -l <want.tsv) -eq 17 ]] || { echo "FAIL: predict wrote $(wc -l <want.tsv) lines, not 17"; exit 1; }

# start_fifo_reader FIFO OUT: cat FIFO into OUT in the background. The test holds the FIFO open
# for reading and writing on fd 3 (Linux opens O_RDWR at once), so cat's open returns before
# anything is written; stop_fifo_reader drops the hold and waits: cat ends at the end of what
# was written, or at once if the FIFO was replaced and nobody wrote to it.
start_fifo_reader() {
  exec 3<>"$1" 4<"$1"
  cat <&4 >"$2" 3>&- 4<&- &
  reader=$!
  exec 4<&-
}
stop_fifo_reader() {
  exec 3>&-
  wait "$reader"
  reader=
}

# 1. '-' is stdout.
predict --output - >stdout.tsv 2>err || bad "--output -: rc $? ($(cat err))"
if cmp -s want.tsv stdout.tsv && [[ ! -e ./- ]]; then
  ok "--output - writes the predictions to stdout"
else
  bad "--output -: stdout has $(wc -l <stdout.tsv) lines, want 17; a file named '-' $([[ -e ./- ]] && echo exists || echo 'does not exist')"
fi

# 2. A FIFO, read by a reader started before predict.
mkfifo fifo
start_fifo_reader fifo fifo.out
predict --output fifo 3>&- 2>err || bad "--output FIFO: rc $? ($(cat err))"
stop_fifo_reader
if [[ -p fifo ]] && cmp -s want.tsv fifo.out; then
  ok "--output FIFO: the reader got all 17 lines, fifo is still a FIFO"
else
  bad "--output FIFO: fifo is now $(stat -c %F fifo), the reader got $(wc -l <fifo.out) lines (want a FIFO, 17)"
fi

# 3. A character device (the null device's numbers), when this test may make one.
if [[ $(id -u) -ne 0 ]]; then
  echo "skip --output DEVICE: not root, cannot mknod a character device"
elif ! mknod fakenull c 1 3 2>err; then
  echo "skip --output DEVICE: mknod refused here ($(cat err))"
else
  predict --output fakenull 2>err || bad "--output DEVICE: rc $? ($(cat err))"
  if [[ -c fakenull ]] && [[ $(head -c 1 fakenull | wc -c) -eq 0 ]]; then
    ok "--output DEVICE: fakenull is still the null device"
  else
    bad "--output DEVICE: fakenull is now $(stat -c %F fakenull) of $(stat -c %s fakenull) bytes"
  fi
fi

# 4. A link to /proc/self/fd/1 (what /dev/stdout is): stdout, written where it stands.
ln -s /proc/self/fd/1 fakestdout
echo "before" >viafd.out
predict --output fakestdout >>viafd.out 2>err || bad "--output link to fd 1: rc $? ($(cat err))"
if [[ -L fakestdout ]] && cmp -s <(echo before; cat want.tsv) viafd.out; then
  ok "--output link to /proc/self/fd/1: appended to stdout's file, the link stays"
else
  bad "--output link to fd 1: fakestdout is now $(stat -c %F fakestdout), stdout's file has $(wc -l <viafd.out) lines (want a link, 18)"
fi

# 5. A regular file is replaced atomically. A large output (1000 copies of the dev rows) is
# written over a small one while a reader polls the file: each read must be one of the two.
awk 'NR == 1 { print; next } { rows[n++] = $0 }
     END { for (i = 0; i < 1000; i++) for (j = 0; j < n; j++) print rows[j] }' data/dev.tsv >big_in.tsv
predict --input big_in.tsv --output big_want.tsv 2>err || bad "big predict: rc $? ($(cat err))"
cp want.tsv big.tsv
inode=$(stat -c %i big.tsv)
old_sum=$(cksum <big.tsv)
new_sum=$(cksum <big_want.tsv)
"$T" predict --model out/final --input big_in.tsv --output big.tsv 2>err &
pid=$!
reads=0 torn=0
while kill -0 "$pid" 2>/dev/null && ((reads < 100000)); do
  sum=$(cksum <big.tsv)
  [[ $sum == "$old_sum" || $sum == "$new_sum" ]] || torn=$((torn + 1))
  reads=$((reads + 1))
done
wait "$pid" || bad "--output FILE: rc $? ($(cat err))"
if cmp -s big.tsv big_want.tsv && [[ $(stat -c %i big.tsv) != "$inode" ]] && ((torn == 0)) &&
  ! ls ./*.tmp.* >/dev/null 2>&1; then
  ok "--output FILE: replaced by rename (new inode; $reads reads while it ran, none torn)"
else
  bad "--output FILE: same content $(cmp -s big.tsv big_want.tsv && echo yes || echo no), inode $inode -> $(stat -c %i big.tsv), $torn of $reads reads torn, temporaries: $(ls ./*.tmp.* 2>/dev/null)"
fi

# 6. Links: followed to the target (the link stays); refused below RINGMASTER_ALLOWED_ROOT.
mkdir root
echo old >target.tsv
ln -s ../target.tsv root/link.tsv
predict --output root/link.tsv 2>err || bad "--output LINK: rc $? ($(cat err))"
if [[ -L root/link.tsv ]] && cmp -s want.tsv target.tsv; then
  ok "--output LINK: the target was written, the link stays"
else
  bad "--output LINK: root/link.tsv is now $(stat -c %F root/link.tsv), target.tsv has $(wc -l <target.tsv) lines"
fi
echo old >target.tsv
# The root holds the model and the input too (a model is read only from inside it); the link
# under it points inside it as well, and is still not followed.
RINGMASTER_ALLOWED_ROOT=$work predict --output "$work/root/link.tsv" 2>err
rc=$?
if ((rc != 0)) && grep -q "symbolic link" err && [[ -L root/link.tsv && $(cat target.tsv) == old ]]; then
  ok "--output LINK below RINGMASTER_ALLOWED_ROOT: refused ($(head -c 120 err))"
else
  bad "--output LINK below the allowed root: rc $rc, target.tsv: $(head -c 20 target.tsv), stderr: $(cat err)"
fi

# 7. gen-data: a FIFO where dev.tsv goes is written in place; '-' is no directory.
mkdir gd
mkfifo gd/dev.tsv
start_fifo_reader gd/dev.tsv gd.dev.out
"$T" gen-data --out gd --train 8 --dev 4 3>&- >/dev/null 2>err || bad "gen-data: rc $? ($(cat err))"
stop_fifo_reader
if [[ -p gd/dev.tsv && $(wc -l <gd.dev.out) -eq 5 && -f gd/train.tsv ]]; then
  ok "gen-data: the FIFO gd/dev.tsv got the 4 rows and a header, and is still a FIFO"
else
  bad "gen-data: gd/dev.tsv is now $(stat -c %F gd/dev.tsv), the reader got $(wc -l <gd.dev.out) lines (want 5)"
fi
if ! "$T" gen-data --out - >/dev/null 2>err && grep -q "standard output cannot hold them" err && [[ ! -e ./- ]]; then
  ok "gen-data --out -: refused"
else
  bad "gen-data --out -: $(cat err)"
fi

exit "$fail"
