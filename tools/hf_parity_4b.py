#!/usr/bin/env python3
"""Full-size parity check of qinfer's CUDA backend against Hugging Face transformers (issue #4, item 5).

Runs on the GPU machine (torch + transformers + CUDA). It generates the deterministic random Qwen3-4B-shape checkpoint
with `qinfer make-test-model --preset 4b-shape` (8 GB, bf16), lets qinfer decode greedily on the GPU with the top-20
log-probabilities of every step, then teacher-forces transformers (float32 weights upcast from the same bf16 file,
eager attention, on the GPU) over the prompt plus qinfer's tokens, so both score the same positions:

- qinfer's greedy token must be transformers' argmax wherever transformers' top-2 logit margin exceeds 0.05;
- two errors per step: the log-sum-exp error (the mean log-probability over qinfer's top-20 ids, absolute) and the
  relative error of those 20 logits centred over the ids, ||c_qinfer - c_hf|| / ||c_hf|| with c = lp - mean(lp) (the
  per-row constant drops out, and a random model's near-flat distribution cannot hide errors behind it). Their RMS over
  a case's steps must stay below 2e-2 or, where bf16 arithmetic itself cannot reach that, below 1.5x the RMS that
  transformers' own bf16 forward (same weights, eager, teacher-forced on the same tokens) gets against the fp32 one.
  The bf16 floor is measured in the same run, so the check cannot pass by construction: an error above both bounds
  fails. (The random 4B's top-20 logits lie within ~1 of each other, where one bf16 forward already differs from fp32
  by 5-19 % relative, so a fixed 2e-2 on this stricter centred metric is out of reach for any bf16 forward.)

The fp32 CPU backend of qinfer is compared on the short prompts too (same metrics, no bf16 allowance): it separates a
modelling error (both backends off) from bf16 rounding (only the GPU one off).

`--kv-cache-dtype fp8` runs both qinfer backends with the fp8 (E4M3) KV cache and applies the same checks and bounds:
it measures what the cache's 3 mantissa bits cost against the same references (the bounds were derived for bf16, so a
failure there says the fp8 error exceeds bf16's allowance, and the JSON report has by how much).

    python3 tools/hf_parity_4b.py --qinfer build-gpu/qinfer --work /tmp/parity4b --out $OUT/parity4b.json

Exit status 0 when every check holds, 1 otherwise; the JSON report has every step's numbers.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

PROMPT_LENGTHS = [1, 64, 517, 2000]
STEPS = 16
TOP = 20
MAX_RELATIVE_ERROR = 2e-2
MARGIN = 0.05
BF16_ALLOWANCE = 1.5
CPU_PROMPT_LENGTHS = [1, 64]


def prompt_ids(length, seed):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(0, 151643, size=length)]


def qinfer_greedy(qinfer, model_dir, prompt, device, kv_cache_dtype):
    command = [qinfer, "generate", "--model", model_dir, "--device", device, "--max-model-len", "4096",
               "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", str(STEPS), "--ignore-eos",
               "--temperature", "0", "--logprobs", str(TOP), "--kv-cache-dtype", kv_cache_dtype, "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@torch.no_grad()
def hf_logprobs(model, prompt, generated):
    ids = torch.tensor([prompt + generated], dtype=torch.long, device="cuda")
    logits = model(input_ids=ids).logits[0].double()
    # Row i predicts token i + 1: the rows that predicted each generated token.
    rows = logits[len(prompt) - 1: len(prompt) - 1 + len(generated)]
    return rows, torch.log_softmax(rows, dim=-1)


def centred_error(ours, theirs):
    """Relative error of two log-probability vectors over the same ids, each centred over those ids."""
    ours_c, theirs_c = ours - ours.mean(), theirs - theirs.mean()
    return float(np.linalg.norm(ours_c - theirs_c) / max(np.linalg.norm(theirs_c), 1e-30))


def rms(values):
    return float(np.sqrt(np.mean(np.square(values))))


def check_case(models, qinfer, model_dir, prompt, device, kv_cache_dtype):
    """qinfer on `device` against transformers fp32; with device cuda the bf16 floor widens the logit bounds."""
    result = qinfer_greedy(qinfer, model_dir, prompt, device, kv_cache_dtype)
    generated = result["token_ids"]
    logits, logprobs = hf_logprobs(models["fp32"], prompt, generated)
    bf16_logprobs = hf_logprobs(models["bf16"], prompt, generated)[1] if device == "cuda" else None
    steps, tokens_ok = [], True
    for i, step in enumerate(result["logprobs"]):
        ids = step["ids"]
        ours = np.array(step["logprobs"], dtype=np.float64)
        theirs = logprobs[i, ids].cpu().numpy()
        entry = {"relative_error": centred_error(ours, theirs), "offset_error": float(abs(ours.mean() - theirs.mean()))}
        if bf16_logprobs is not None:
            floor = bf16_logprobs[i, ids].cpu().numpy()
            entry["hf_bf16_relative_error"] = centred_error(floor, theirs)
            entry["hf_bf16_offset_error"] = float(abs(floor.mean() - theirs.mean()))
        top2 = torch.topk(logits[i], 2)
        margin = float(top2.values[0] - top2.values[1])
        hf_token = int(top2.indices[0])
        token_ok = generated[i] == hf_token or margin <= MARGIN
        tokens_ok &= token_ok
        steps.append({"token": generated[i], "hf_argmax": hf_token, "hf_margin": margin, **entry, "token_ok": token_ok})
    # Rounding errors of two bf16 forwards are samples of the same size, so the bf16 allowance compares the RMS over
    # the case's steps, not step by step.
    summary = {"tokens_ok": tokens_ok}
    for metric in ("relative_error", "offset_error"):
        ours = rms([s[metric] for s in steps])
        bound = MAX_RELATIVE_ERROR
        if bf16_logprobs is not None:
            bound = max(bound, BF16_ALLOWANCE * rms([s["hf_bf16_" + metric] for s in steps]))
        summary[metric] = {"rms": ours, "bound": bound, "ok": ours < bound}
    ok = tokens_ok and all(summary[m]["ok"] for m in ("relative_error", "offset_error"))
    return ok, summary, steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--qinfer", required=True)
    parser.add_argument("--work", required=True, help="folder for the 8 GB checkpoint")
    parser.add_argument("--out", required=True, help="JSON report")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--kv-cache-dtype", default="bf16", choices=["bf16", "fp8"], help="qinfer's KV cache storage")
    args = parser.parse_args()
    model_dir = os.path.join(args.work, "qwen3-4b-shape")
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        subprocess.run([args.qinfer, "make-test-model", "--out", model_dir, "--preset", "4b-shape", "--seed",
                        str(args.seed)], check=True)
    models = {name: AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
              .to("cuda").eval() for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    runs = [("cuda", length) for length in PROMPT_LENGTHS] + [("cpu", length) for length in CPU_PROMPT_LENGTHS]
    cases, all_ok = [], True
    for device, length in runs:
        prompt = prompt_ids(length, 4000 + PROMPT_LENGTHS.index(length))
        ok, summary, steps = check_case(models, args.qinfer, model_dir, prompt, device, args.kv_cache_dtype)
        all_ok &= ok
        logit, offset = summary["relative_error"], summary["offset_error"]
        print(f"{device:4s} {args.kv_cache_dtype} KV, prompt {length:5d}: {'ok' if ok else 'FAILED'}, tokens {'ok' if summary['tokens_ok'] else 'DIFFER'}, "
              f"centred logit error RMS {logit['rms']:.2e} (bound {logit['bound']:.2e}), log-sum-exp error RMS "
              f"{offset['rms']:.2e} (bound {offset['bound']:.2e})", flush=True)
        cases.append({"device": device, "prompt_length": length, "ok": ok, **summary, "steps": steps})
    report = {"ok": all_ok, "torch": torch.__version__, "transformers": transformers.__version__,
              "reference": "float32, eager, teacher-forced on qinfer's tokens; bf16 floor: transformers in bfloat16",
              "kv_cache_dtype": args.kv_cache_dtype, "max_relative_error": MAX_RELATIVE_ERROR, "bf16_allowance": BF16_ALLOWANCE, "margin": MARGIN,
              "cases": cases}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
