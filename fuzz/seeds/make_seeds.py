#!/usr/bin/env python3
"""Writes the hand-made seed corpora under fuzz/corpus/<target>/ (kept in the tree; rerun only to
change them). Valid inputs and edge cases, a few hundred bytes each. The coordinator target's
records hold protobuf messages encoded by `protoc --encode` from protos/. Files named regress_*
are inputs that once crashed or hung a target (docs/reliability.md); this script leaves them be."""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, pad=True):
    header, blob, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blob += raw
        off += len(raw)
    h = json.dumps(header).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def seeds_safetensors():
    t = "safetensors_fuzz"
    f32 = struct.pack("<4f", 1.0, -2.5, 0.0, 3.25)
    write(t, "f32_2x2", safetensors([("w", "F32", [2, 2], f32)], {"format": "pt"}))
    write(t, "mixed", safetensors([("h", "F16", [3], struct.pack("<3H", 0x3C00, 0x8001, 0x7C00)),
                                   ("b", "BF16", [2], struct.pack("<2H", 0x3F80, 0xFF80)),
                                   ("d", "F64", [1], struct.pack("<d", 1e300)),
                                   ("i", "I64", [1, 1], struct.pack("<q", -1)),
                                   ("m", "BOOL", [2], b"\x01\x00")]))
    write(t, "empty_tensor", safetensors([("z", "F32", [0, 5], b""), ("s", "U8", [], b"\x07")]))
    write(t, "no_tensors", safetensors([], {"a": "b"}))
    write(t, "unpadded", safetensors([("w", "I8", [3], b"\x01\x02\x03")], pad=False))
    # Edge cases that must be refused cleanly.
    write(t, "huge_header_len", struct.pack("<Q", 1 << 62) + b"{}")
    write(t, "gap", struct.pack("<Q", 64) + json.dumps(
        {"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode().ljust(64) + b"\0" * 8)
    write(t, "dup_key", struct.pack("<Q", 24) + b'{"a":{},"a":{}}'.ljust(24))


def seeds_bert_config():
    t = "bert_config_fuzz"
    base = {"model_type": "bert", "vocab_size": 30, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32,
            "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "initializer_range": 0.02, "pad_token_id": 0}
    write(t, "tiny", json.dumps(base, indent=2))
    labelled = dict(base, id2label={"0": "NEGATIVE", "1": "POSITIVE", "2": "NEUTRAL"},
                    label2id={"NEGATIVE": 0, "POSITIVE": 1, "NEUTRAL": 2},
                    architectures=["BertForSequenceClassification"])
    write(t, "labels", json.dumps(labelled))
    write(t, "num_labels", json.dumps(dict(base, num_labels=1)))
    write(t, "bad_type", json.dumps(dict(base, hidden_size="8")))
    write(t, "roberta", json.dumps(dict(base, model_type="roberta")))
    write(t, "float_int", json.dumps(dict(base, vocab_size=30.0, layer_norm_eps=1e-45)))
    write(t, "truncated", json.dumps(base)[:40])


def seeds_job_spec():
    t = "job_spec_fuzz"
    write(t, "from_scratch", """name: demo
model:
  config:
    hidden_size: 128
    num_hidden_layers: 2
    num_attention_heads: 4
    intermediate_size: 512
    max_position_embeddings: 64
  vocab: data/vocab.txt
  num_labels: 2
data:
  train: data/train.tsv
  eval: data/dev.tsv
  max_seq_len: 64
train:
  epochs: 2
  global_batch_size: 32
  micro_batch_size: 16
  lr: 5.0e-4
  lr_schedule: linear
  warmup_ratio: 0.06
  adam_betas: [0.9, 0.98]
output:
  dir: runs/demo
  checkpoint_every_steps: 200
""")
    write(t, "init_from_dist", """name: sst2
model:
  init_from: /models/bert-base-uncased
  do_lower_case: true
  num_labels: 3
  hidden_dropout_prob: 0.0
data: {train: /data/train.tsv, max_seq_len: 128, shuffle: false}
train: {max_steps: 1000, lr: 2e-5, precision: bf16, device: auto, seed: 7, warmup_steps: 10}
output: {dir: /runs/sst2, keep_checkpoints: 2}
distributed:
  nodes: "2:4"
  procs_per_node: 2
  sharding: hybrid_shard
  compression: powersgd
  powersgd_rank: 8
  backend: gloo
restart:
  max_restarts: 5
""")
    write(t, "unknown_key", "name: x\ntrain:\n  lrr: 1e-3\n")
    write(t, "anchors", "a: &x {k: [1, 2, *x]}\nname: *x\n")
    write(t, "flow_nesting", "name: " + "[" * 40 + "]" * 40 + "\n")
    write(t, "duplicate", "name: a\nname: b\n")


def seeds_tsv():
    t = "tsv_fuzz"
    write(t, "classes", b"\x02sentence\tlabel\na fine movie\t1\nawful .\t0\n")
    write(t, "bom_crlf", b"\x03\xef\xbb\xbfidx\tsentence\tlabel\r\n0\tit 's \"good\"\t2\r\n1\tmeh\t0")
    write(t, "regression", b"\x01label\tsentence\n0.25\tok\n-1e3\tbad\n\n\n")
    write(t, "predict", b"\x00sentence\nno labels here\n\xc3\xa9t\xc3\xa9\n")
    write(t, "bad_utf8", b"\x02sentence\tlabel\nbad \xc0\xaf\t1\n")
    write(t, "blank_middle", b"\x02sentence\tlabel\na\t1\n\nb\t0\n")


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", ",", ".", "the", "un", "##aff",
         "##able", "hello", "world", "caf\u00e9", "\u65e5", "##s", ""]


def seeds_vocab():
    t = "vocab_fuzz"
    write(t, "lf_uncased", b"\x01" + "\n".join(VOCAB).encode() + b"\n")
    write(t, "crlf_cased", b"\x00" + "\r\n".join(VOCAB).encode())
    write(t, "cr_only", b"\x03" + "\r".join(VOCAB).encode() + b"\r")
    write(t, "no_unk", b"\x01[PAD]\n[CLS]\n[SEP]\n")
    write(t, "bad_utf8", b"\x01[PAD]\n[UNK]\n[CLS]\n[SEP]\n\xff\n")


def seeds_tokenizer():
    t = "tokenizer_fuzz"
    write(t, "ascii", b"\x21Hello, world! The unaffable cafe's play.")
    write(t, "unicode", "\x10Caf\u00e9 NA\u00cfVE \u65e5\u672c\u8a9e \u01c5 \ufb01 \u0130 \u03a3\u03c3\u03c2 \U0001F44D!".encode())
    write(t, "specials", b"\x07[CLS] hello [MASK][SEP][PAD]x[UNK] [mask]")
    write(t, "controls", b"\x05a\x00b\tc\x0bd\xef\xbf\xbde\xe2\x80\x8bf\r\n")
    write(t, "ill_formed", b"\x09\xc3\x28 \xa0\xa1 \xe2\x82 \xf0\x28\x8c\xbc ok")
    write(t, "long_word", b"\x01" + b"x" * 150 + b" " + b"un" + b"aff" * 30)


def encode(proto_file, message, text):
    out = subprocess.run(["protoc", "-I", os.path.join(ROOT, "protos"), "--encode=" + message,
                          proto_file], input=text.encode(), capture_output=True, check=True)
    return out.stdout


def record(call, payload):
    return bytes([call]) + struct.pack("<H", len(payload)) + payload


def seeds_coordinator():
    t = "coordinator_requests_fuzz"
    C, A = "ringmaster/v1/coordinator.proto", "ringmaster/v1/agent.proto"
    (SUBMIT, GET, LIST, CANCEL, NODES, REGISTER, AGENT, CLOCK, ATTACH) = range(9)
    job = ("name: sst2\\nmodel:\\n  init_from: models/bert-tiny\\ndata:\\n  train: data/train.tsv\\n"
           "output:\\n  dir: runs/sst2\\ndistributed:\\n  nodes: \\\"1:2\\\"\\n  procs_per_node: 1\\n")
    submit = encode(C, "ringmaster.v1.SubmitJobRequest",
                    'client_version { major: 1 } job_yaml: "%s" base_dir: "/shared/jobs" '
                    'source: "sst2.yaml" request_id: "r1"' % job)
    reg = lambda name: encode(A, "ringmaster.v1.RegisterRequest",
                              'agent_version { major: 1 } inventory { node_name: "%s" hostname: "h-%s" '
                              'addresses: "10.0.0.%d" cpu_cores: 4 }' % (name, name, len(name)))
    running = encode(A, "ringmaster.v1.AgentMessage",
                     'node_id: "node-000001" seq: 1 ranks { job_id: "job-000001" generation: 0 '
                     'global_rank: 0 local_rank: 0 state: RANK_PROCESS_STATE_RUNNING pid: 42 step: 3 '
                     'total_steps: 10 loss: 0.5 } acked_command_ids: 1')
    exited = encode(A, "ringmaster.v1.AgentMessage",
                    'node_id: "node-000001" seq: 2 ranks { job_id: "job-000001" generation: 0 '
                    'global_rank: 0 state: RANK_PROCESS_STATE_EXITED exit_code: 1 '
                    'last_error_line: "boom" } command_errors { command_id: 7 error: "no" }')
    get = encode(C, "ringmaster.v1.GetJobRequest", 'job_id: "job-000001"')
    lst = encode(C, "ringmaster.v1.ListJobsRequest", "page_size: 1")
    cancel = encode(C, "ringmaster.v1.CancelJobRequest", 'job_id: "job-000001" reason: "fuzz"')
    idle = encode(A, "ringmaster.v1.AgentMessage", 'node_id: "node-000001" seq: 0')
    write(t, "submit_then_run", record(REGISTER, reg("a")) + record(ATTACH, b"node-000001") +
          record(AGENT, idle) +
          record(SUBMIT, submit) +
          record(CLOCK, b"\x06") + record(AGENT, running) + record(GET, get) +
          record(LIST, lst) +
          record(AGENT, exited) + record(CLOCK, b"\x0b") + record(NODES, b""))
    write(t, "cancel", record(SUBMIT, submit) + record(SUBMIT, submit) + record(CANCEL, cancel) +
          record(LIST, b"") + record(REGISTER, reg("b")) + record(CLOCK, b"\x40"))
    write(t, "bad_version", record(SUBMIT, encode(C, "ringmaster.v1.SubmitJobRequest",
                                                  'client_version { major: 99 } job_yaml: "x: 1"')))
    write(t, "unknown_node", record(AGENT, running) + record(GET, b"") + record(CANCEL, b""))


def main():
    for f in (seeds_safetensors, seeds_bert_config, seeds_job_spec, seeds_tsv, seeds_vocab,
              seeds_tokenizer, seeds_coordinator):
        f()
    return 0


if __name__ == "__main__":
    sys.exit(main())
