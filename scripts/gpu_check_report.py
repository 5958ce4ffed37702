#!/usr/bin/env python3
"""Turns scripts/gpu-check.sh's gpu-check.json into the tables of docs/performance-gpu.md.

  gpu_check_report.py --json OUT/gpu-check.json --print    the tables on stdout
  gpu_check_report.py --json OUT/gpu-check.json --write docs/performance-gpu.md
        replaces the text between the page's "gpu-check:begin" and "gpu-check:end" markers

An emulator rehearsal's JSON (mode "emulated") is refused by --write: its figures come from the
CPU emulator and are not performance figures. --print shows it under that warning.
"""
import argparse
import json
import re
import sys

BEGIN = "<!-- gpu-check:begin -->"
END = "<!-- gpu-check:end -->"
ROWS = [("ringmaster_fp32", "ringmaster CUDA engine, fp32"),
        ("ringmaster_bf16", "ringmaster CUDA engine, bf16"),
        ("torch_eager_fp32", "PyTorch eager, fp32"),
        ("torch_eager_bf16_sdpa", "PyTorch eager, bf16 autocast + SDPA"),
        ("torch_compile_bf16_sdpa", "PyTorch torch.compile, bf16 autocast + SDPA")]


def num(v, fmt):
    return "" if v is None else format(v, fmt)


def mem(s):
    v = s.get("gpu_mem_process_peak_mib")
    if v is None:
        v = s.get("gpu_mem_device_delta_peak_mib")
    return num(v, ".0f")


def status_cell(s):
    st = s.get("status", "")
    return "" if st == "pass" else st


def render(r):
    out = []
    emulated = r.get("mode") != "gpu"
    if r.get("shapes") == "tiny" and not emulated:
        out.append("**TINY SHAPES (--tiny smoke test): not BERT-base figures.**\n")
    if emulated:
        out.append("**EMULATOR REHEARSAL: these figures come from the CPU emulator and are not "
                   "performance figures.**\n")
    env = r.get("env", {})
    st = r.get("stages", {})
    b = st.get("bench", {})
    shape = b.get("shape", {})
    m = shape.get("model", {})
    out.append(f"Run {r.get('started_utc', '?')} on {env.get('gpu') or 'no GPU seen'}; "
               f"bundle {r.get('bundle', {}).get('commit')}, CUDA "
               f"{r.get('bundle', {}).get('cuda_built_with')}; total {r.get('total_seconds')} s "
               f"of a {r.get('budget_s')} s budget.\n")
    ceil = b.get("matmul_bf16_ceiling", {})
    out.append(f"Shape: BERT (hidden {m.get('hidden_size')}, {m.get('num_hidden_layers')} layers, "
               f"vocab {m.get('vocab_size')}), seq {shape.get('seq')}, batch {shape.get('batch')}, "
               f"training steps (forward, backward, clipping, AdamW). bf16 matmul ceiling "
               f"(torch.matmul {ceil.get('n')}^3): {num(ceil.get('tflops'), '.0f')} TFLOP/s. "
               "MFU = model FLOPs per second / that ceiling (for fp32 rows too).\n")
    out.append("| run | samples/s | tokens/s | step ms | peak GPU memory MiB | MFU | note |")
    out.append("|---|---|---|---|---|---|---|")
    for key, label in ROWS:
        s = b.get(key, {})
        mfu = s.get("mfu_vs_bf16_matmul")
        out.append(f"| {label} | {num(s.get('samples_per_s'), '.1f')} | "
                   f"{num(s.get('tokens_per_s'), '.0f')} | {num(s.get('step_ms'), '.1f')} | "
                   f"{mem(s)} | {'' if mfu is None else format(100 * mfu, '.1f') + '%'} | "
                   f"{status_cell(s)} |")
    out.append("")
    # The issue's targets.
    rb, rf = b.get("ringmaster_bf16", {}), st.get("finetune", {})
    te, tc = b.get("torch_eager_bf16_sdpa", {}), b.get("torch_compile_bf16_sdpa", {})

    def ratio(a, c):
        return a / c if a and c else None

    r1 = ratio(rb.get("samples_per_s"), te.get("samples_per_s"))
    r2 = ratio(rb.get("samples_per_s"), tc.get("samples_per_s"))
    mfu = rb.get("mfu_vs_bf16_matmul")
    ft = rf.get("train_s_first_to_last_step") if rf.get("status") == "pass" else \
        rf.get("projected_train_s")
    mem_ours = rb.get("gpu_mem_process_peak_mib")
    mem_theirs = te.get("gpu_mem_process_peak_mib")

    def met(v, ok):
        return "" if v is None else ("yes" if ok(v) else "no")

    out.append("| target (issue #18) | goal | measured | met |")
    out.append("|---|---|---|---|")
    out.append(f"| bf16 samples/s vs PyTorch eager bf16 | >= 1.3x | {num(r1, '.2f')} | "
               f"{met(r1, lambda v: v >= 1.3)} |")
    out.append(f"| bf16 samples/s vs torch.compile | >= 1.0x | {num(r2, '.2f')} | "
               f"{met(r2, lambda v: v >= 1.0)} |")
    out.append(f"| MFU, bf16 | >= 45% | {'' if mfu is None else format(100 * mfu, '.1f') + '%'} "
               f"| {met(mfu, lambda v: v >= 0.45)} |")
    ft_note = "" if ft is None else (f"{ft:.1f} s" + ("" if rf.get("status") == "pass"
                                                      else " (projected)"))
    out.append(f"| SST-2-size fine-tune, 3 epochs ({rf.get('precision', '?')}) | < 60 s | "
               f"{ft_note} | {met(ft, lambda v: v < 60)} |")
    mr = ratio(mem_ours, mem_theirs)
    out.append(f"| GPU memory vs PyTorch eager bf16 | <= 1.0x | {num(mr, '.2f')} | "
               f"{met(mr, lambda v: v <= 1.0)} |")
    out.append("")
    # Correctness.
    tests = st.get("tests", {}).get("tests", [])
    eng, gelu, san = st.get("engine", {}), st.get("gelu", {}), st.get("sanitizers", {})
    out.append("| check | result |")
    out.append("|---|---|")
    for t in tests:
        g = t.get("gtest") or {}
        out.append(f"| {t['name']} | {t.get('status')}"
                   + (f" ({g.get('tests')} cases, {g.get('failures')} failed)" if g else "")
                   + " |")
    out.append(f"| CUDA engine vs CPU engine (tests/trainer_cuda_engine.sh) | {eng.get('status')}"
               + (f", max relative loss difference {eng['max_rel_loss_diff']:.2e}"
                  if eng.get("max_rel_loss_diff") is not None else "") + " |")
    if "gelu_fwd_form" in gelu:
        out.append(f"| cuBLASLt GELU epilogue | forward {gelu['gelu_fwd_form']} (max abs diff: erf "
                   f"{gelu.get('gelu_fwd_max_abs_diff_erf')}, tanh "
                   f"{gelu.get('gelu_fwd_max_abs_diff_tanh')}); DGELU {gelu.get('dgelu_form')}; "
                   f"FAST_TF32 {gelu.get('tf32_rounding')} |")
    else:
        out.append(f"| cuBLASLt GELU epilogue | {gelu.get('status')} |")
    if "runs" in san:
        for x in san["runs"]:
            out.append(f"| compute-sanitizer {x['tool']} {x['test']} | {x['status']}"
                       + (f", {x['errors']} errors" if x.get("errors") is not None else "") + " |")
    else:
        out.append(f"| compute-sanitizer | {san.get('status')} |")
    if rf:
        out.append(f"| fine-tune dev accuracy | {rf.get('dev_accuracy')} ({rf.get('status')}) |")
    # The gradient-compression kernels of the multi-GPU path (issue #19), from bench_kernels.
    kern = st.get("kernels", {})
    comp = [k for k in kern.get("kernels", [])
            if k.get("kernel", "").startswith(("wire_", "powersgd_"))]
    out.append("")
    out.append(f"Gradient-compression kernels (bench_kernels, {kern.get('status', 'not run')}; "
               f"copy ceiling {num(kern.get('ceilings', {}).get('copy_gbs'), '.0f')} GB/s):")
    out.append("")
    out.append("| kernel | shape | valid | us/call | GB/s | of copy ceiling |")
    out.append("|---|---|---|---|---|---|")
    for k in comp:
        out.append(f"| {k['kernel']} | {k.get('shape')} | {'yes' if k.get('valid') else 'NO'} | "
                   f"{num(k.get('us_per_call'), '.1f')} | {num(k.get('rate'), '.1f')} | "
                   f"{num(k.get('fraction_of_ceiling'), '.2f')} |")
    if not comp:
        out.append("| (none recorded) | | | | | |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--print", action="store_true")
    g.add_argument("--write", metavar="PAGE")
    args = p.parse_args()
    r = json.load(open(args.json))
    text = render(r)
    if args.print:
        sys.stdout.write(text)
        return 0
    if r.get("mode") != "gpu" or r.get("shapes") != "bert-base":
        print("gpu_check_report: refusing to write an emulator rehearsal's (or a --tiny run's) "
              f"figures into {args.write}: they are not performance figures", file=sys.stderr)
        return 2
    page = open(args.write).read()
    if BEGIN not in page or END not in page:
        print(f"gpu_check_report: {args.write} has no {BEGIN} ... {END} section", file=sys.stderr)
        return 2
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                 lambda _: BEGIN + "\n" + text + END, page, flags=re.S)
    open(args.write, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
