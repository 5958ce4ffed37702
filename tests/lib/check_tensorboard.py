"""Reads a run's TensorBoard events with the tensorboard package and checks them against the
run's metrics.jsonl.

    check_tensorboard.py OUTPUT_DIR EVENTS_DIR FILES

Every number of every metrics.jsonl line is a scalar at the line's step under the HF Trainer's
tag (eval_<x> -> eval/<x>, lr -> train/learning_rate, <x> -> train/<x>; an evaluation line's
epoch is not repeated), with the float32 of its value; each tag has exactly one point per step
that has it and none at other steps. train/samples_per_second is at every training step,
positive and finite. The end-of-training figures are at the last step: train/train_runtime is
ranks/rank-0.json's train_seconds, train/train_steps_per_second the run's steps over it (FILES
== 1: a run that did not resume). EVENTS_DIR holds FILES events files named
events.out.tfevents.<seconds>.<this host>.
"""
import json
import math
import os
import socket
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator


def tag_of(key):
    if key.startswith("eval_"):
        return "eval/" + key[len("eval_"):]
    return "train/" + ("learning_rate" if key == "lr" else key)


def main():
    out, events_dir, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
    names = sorted(n for n in os.listdir(events_dir) if "tfevents" in n)
    if len(names) != files:
        sys.exit(f"{events_dir}: {len(names)} events files {names}, expected {files}")
    host = socket.gethostname()
    for n in names:
        parts = n.split(".")
        if not (n.startswith("events.out.tfevents.") and parts[3].isdigit()
                and ".".join(parts[4:]) == host):
            sys.exit(f"events file name {n} is not events.out.tfevents.<seconds>.{host}")

    acc = event_accumulator.EventAccumulator(events_dir, size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}

    want = {}
    train_steps = []
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            is_eval = "eval_loss" in j
            if not is_eval:
                train_steps.append(j["step"])
            for key, value in j.items():
                if key == "step" or (is_eval and key == "epoch") or isinstance(value, bool):
                    continue
                want.setdefault(tag_of(key), []).append((j["step"], float(np.float32(value))))
    if not train_steps or "eval/loss" not in want:
        sys.exit(f"metrics.jsonl has no training or no evaluation lines: tags {sorted(want)}")

    checked = 0
    for tag, points in want.items():
        if sorted(got.get(tag, [])) != sorted(points):
            sys.exit(f"{tag}: TensorBoard has {got.get(tag)}\nmetrics.jsonl has {points}")
        checked += len(points)

    throughput = got.get("train/samples_per_second", [])
    if sorted(s for s, _ in throughput) != sorted(train_steps):
        sys.exit(f"train/samples_per_second at steps {[s for s, _ in throughput]}, "
                 f"training steps {train_steps}")
    if not all(math.isfinite(v) and v > 0 for _, v in throughput):
        sys.exit(f"train/samples_per_second not positive: {throughput}")

    last = max(train_steps)
    runtime = got.get("train/train_runtime", [])
    steps_per_second = got.get("train/train_steps_per_second", [])
    samples_per_second = got.get("train/train_samples_per_second", [])
    if [s for s, _ in runtime + steps_per_second + samples_per_second] != [last] * 3:
        sys.exit(f"end-of-training figures not once at step {last}: {runtime} "
                 f"{steps_per_second} {samples_per_second}")
    with open(os.path.join(out, "ranks", "rank-0.json")) as f:
        train_seconds = json.load(f)["train_seconds"]
    if runtime[0][1] != float(np.float32(train_seconds)):
        sys.exit(f"train/train_runtime {runtime[0][1]} != rank-0.json train_seconds {train_seconds}")
    if files == 1:
        expected = float(np.float32(len(train_steps) / train_seconds))
        if not math.isclose(steps_per_second[0][1], expected, rel_tol=1e-6):
            sys.exit(f"train/train_steps_per_second {steps_per_second[0][1]} != "
                     f"{len(train_steps)} steps / {train_seconds} s")
    extra = sorted(set(got) - set(want) - {"train/samples_per_second", "train/train_runtime",
                                           "train/train_steps_per_second",
                                           "train/train_samples_per_second"})
    if extra:
        sys.exit(f"TensorBoard has tags metrics.jsonl lacks: {extra}")
    print(f"ok: {checked} scalars under {len(want)} tags at {len(train_steps)} steps equal "
          f"metrics.jsonl's ({len(names)} events file(s)); train_runtime {runtime[0][1]:.3f} s")


if __name__ == "__main__":
    main()
