#!/usr/bin/env python3
"""Reference outputs of Hugging Face transformers for qinfer's generated test models.

Runs where torch + transformers exist (the GPU test machine). For each preset it asks qinfer to generate the
checkpoint (bit-identical on every machine), runs transformers' Qwen3ForCausalLM in float32 with eager attention on the
CPU, and records greedy decoding: per step the chosen token and the top-5 log-probabilities of the raw logits.

    python3 tools/hf_reference.py --qinfer build/src/cli/qinfer --out tests/data/hf_reference

The JSON files it writes are committed; tests/backend/test_hf_parity.cpp replays them against the CPU backend.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

CASES = {
    # preset: (weight seed, prompt lengths)
    "tiny": (1, [1, 7, 64, 517, 2000]),
    "tiny-untied": (2, [1, 16, 333, 2000]),
}
STEPS = 24
TOP = 5


def prompt_ids(length, seed, vocab):
    rng = np.random.default_rng(seed)
    # Avoid the special-token range so prompts look like text.
    return [int(x) for x in rng.integers(0, 151643, size=length)]


@torch.no_grad()
def greedy_reference(model, prompt):
    input_ids = torch.tensor([prompt], dtype=torch.long)
    out = model(input_ids=input_ids, use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1]
    steps = []
    for _ in range(STEPS):
        logprobs = torch.log_softmax(logits.double(), dim=-1)
        top = torch.topk(logprobs, TOP)
        token = int(torch.argmax(logits))
        sorted_logits = torch.sort(logits, descending=True).values
        steps.append({
            "token": token,
            "top_ids": [int(i) for i in top.indices],
            "top_logprobs": [float(v) for v in top.values],
            "margin": float(sorted_logits[0] - sorted_logits[1]),
        })
        out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1]
    return steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--qinfer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    for preset, (seed, lengths) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.qinfer, "make-test-model", "--out", tmp, "--preset", preset, "--seed", str(seed)],
                           check=True)
            model = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager")
            model.eval()
            vocab = model.config.vocab_size
            cases = []
            for i, length in enumerate(lengths):
                prompt = prompt_ids(length, 1000 * seed + i, vocab)
                cases.append({"prompt": prompt, "steps": greedy_reference(model, prompt)})
                print(f"{preset}: prompt of {length} tokens done", flush=True)
        result = {
            "preset": preset,
            "weight_seed": seed,
            "made_with": {
                "command": "python3 tools/hf_reference.py --qinfer build/src/cli/qinfer --out tests/data/hf_reference",
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "dtype": "float32",
                "attn_implementation": "eager",
                "device": "cpu",
            },
            "steps": STEPS,
            "cases": cases,
        }
        with open(os.path.join(args.out, f"{preset}.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
