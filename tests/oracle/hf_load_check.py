"""Oracle for trainer/io/hf_model_dir_test.cc: transformers is the reference for what a Hugging
Face model directory is.

Usage: hf_load_check.py SPEC.json

SPEC.json:
  {"ours": DIR exported by ExportHfModelDir,
   "expect": {"num_labels": int, "id2label": [str], "do_lower_case": bool,
              "model_max_length": int, "text": str, "input_ids": [int]},
   "work": DIR where the checkpoints saved by transformers are written,
   "config": {BertConfig kwargs for those checkpoints}}

1. Loads "ours" with BertForSequenceClassification / BertTokenizer.from_pretrained and checks
   that nothing was missing, unexpected or re-initialized, and that the tokenizer settings hold.
2. Writes into "work" checkpoints saved by transformers (save_pretrained, safetensors): a
   BertForSequenceClassification (fp32, fp16, bf16), a BertModel with and without pooler, and a
   BertForPreTraining. Each DIR gets DIR_ref.safetensors with its state_dict in fp32 under the
   same names, for the C++ side to compare what LoadHfModelDir read.

Exits 77 when torch/transformers are not importable (the test then skips), 1 on a failed check.
"""

import json
import os
import sys


def fail(msg):
    print("hf_load_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    try:
        import torch
        import transformers
        from safetensors.torch import load_file, save_file
    except ImportError as e:
        print("skip: %s" % e)
        sys.exit(77)
    transformers.logging.set_verbosity_error()

    with open(sys.argv[1]) as f:
        spec = json.load(f)
    ours, expect, work = spec["ours"], spec["expect"], spec["work"]

    # 1. Our export, loaded by transformers.
    model, info = transformers.BertForSequenceClassification.from_pretrained(
        ours, output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            fail("%s loading %s: %s" % (kind, ours, info[kind]))
    file_sd = load_file(os.path.join(ours, "model.safetensors"))
    model_sd = model.state_dict()
    if set(file_sd) != set(model_sd):
        fail("state_dict keys differ from the file: only in file %s, only in model %s" %
             (sorted(set(file_sd) - set(model_sd)), sorted(set(model_sd) - set(file_sd))))
    for k, v in file_sd.items():
        if v.dtype != torch.float32:
            fail("%s is %s, expected float32" % (k, v.dtype))
        if not torch.equal(model_sd[k], v):
            fail("%s: transformers holds other values than the file" % k)
    cfg = model.config
    if cfg.num_labels != expect["num_labels"]:
        fail("num_labels %d, expected %d" % (cfg.num_labels, expect["num_labels"]))
    want_labels = {i: name for i, name in enumerate(expect["id2label"])}
    if cfg.id2label != want_labels:
        fail("id2label %s, expected %s" % (cfg.id2label, want_labels))
    if cfg.problem_type != "single_label_classification":
        fail("problem_type %s" % cfg.problem_type)
    if cfg.hidden_act != "gelu" or cfg.position_embedding_type != "absolute":
        fail("hidden_act %s position_embedding_type %s" %
             (cfg.hidden_act, cfg.position_embedding_type))

    tok = transformers.BertTokenizer.from_pretrained(ours)
    if tok.do_lower_case != expect["do_lower_case"]:
        fail("tokenizer do_lower_case %s" % tok.do_lower_case)
    if tok.model_max_length != expect["model_max_length"]:
        fail("tokenizer model_max_length %s" % tok.model_max_length)
    ids = tok(expect["text"])["input_ids"]
    if ids != expect["input_ids"]:
        fail("tokenized %r as %s, expected %s" % (expect["text"], ids, expect["input_ids"]))
    if (tok.cls_token, tok.sep_token, tok.pad_token, tok.unk_token, tok.mask_token) != (
            "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"):
        fail("special tokens %s" % tok.special_tokens_map)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    if tuple(logits.shape) != (1, expect["num_labels"]) or not torch.isfinite(logits).all():
        fail("forward gave %s" % logits)

    # 2. Checkpoints saved by transformers, for LoadHfModelDir.
    config = transformers.BertConfig(**spec["config"])

    def randomize(m, seed):
        # Non-trivial values everywhere (HF init has zero biases and unit LayerNorm weights,
        # which would hide a bias loaded into the wrong place).
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        return m

    def save(name, model, dtype=torch.float32):
        d = os.path.join(work, name)
        model = model.to(dtype)
        model.save_pretrained(d, safe_serialization=True)
        ref = {k: v.detach().to(torch.float32).contiguous().clone()
               for k, v in model.state_dict().items()}
        save_file(ref, d + "_ref.safetensors")

    save("hf_cls", randomize(transformers.BertForSequenceClassification(config), 1))
    save("hf_cls_f16", randomize(transformers.BertForSequenceClassification(config), 2),
         torch.float16)
    save("hf_cls_bf16", randomize(transformers.BertForSequenceClassification(config), 3),
         torch.bfloat16)
    save("hf_base", randomize(transformers.BertModel(config), 4))
    save("hf_base_nopool", randomize(transformers.BertModel(config, add_pooling_layer=False), 5))
    save("hf_pretrain", randomize(transformers.BertForPreTraining(config), 6))
    print("ok")


if __name__ == "__main__":
    main()
