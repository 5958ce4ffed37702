#!/usr/bin/env bash
# The long form of tests/dist_compression_accuracy.sh, not run in CI: the same checks (each
# compression mode within 1 point of uncompressed dev accuracy at 2 ranks, PowerSGD on the mean
# of two seeds and under a quarter of fp32's bytes) on the demo job itself, width 128, 8 epochs
# over 8000 sentences. 14-18 minutes on 2 cores. CI runs the short form (width 64, 64000
# sentences seen once: the same 2000 steps), see the test's header for both forms' figures.
#
#   scripts/bench-compression-accuracy.sh [--build DIR] [--device cpu|cuda] [--form long|short]
#                                         [--runs "NAME ..."] [--jobs N]
#     --build   default build/; the trainer is built there first, configured if need be
#     --device  cuda: the CUDA engine's ranks (NCCL, the GPU codecs); in the emulator build (no
#               GPU) one short-form run took 23 minutes on 2 cores shared with builds
#     --form    default long (the demo job); short is CI's form
#     --runs    a subset of the runs: none none43 fp16 bf16 int8 int8_allreduce powersgd powersgd43
#               (default all; none is always needed, none43/powersgd/powersgd43 go together)
#     --jobs    runs at once (default 1); the emulated ranks wait on each other much of the
#               time, so several runs share 2 cores well
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$ROOT/build"
device=cpu
form=long
while (($#)); do
  case $1 in
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --device) device=$2; shift 2 ;;
    --form) form=$2; shift 2 ;;
    --runs) export RINGMASTER_COMPRESSION_RUNS=$2; shift 2 ;;
    --jobs) export RINGMASTER_COMPRESSION_JOBS=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--device cpu|cuda] [--form long|short] [--runs \"NAME ...\"] [--jobs N]" >&2
      exit 2 ;;
  esac
done
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$build" ringmaster-trainer
TRAINER="$build/trainer/ringmaster-trainer"
[[ -x $TRAINER ]] || { echo "$TRAINER not built" >&2; exit 1; }
# An emulator build (-DRINGMASTER_CUDA_EMU=ON) runs CUDA ranks only when asked; no effect on a
# real CUDA build.
[[ $device == cuda ]] && export RINGMASTER_EMULATED_CUDA_OK=1
TRAINER=$TRAINER RINGMASTER_COMPRESSION_ACCURACY=$form RINGMASTER_COMPRESSION_DEVICE=$device exec bash "$ROOT/tests/dist_compression_accuracy.sh"
