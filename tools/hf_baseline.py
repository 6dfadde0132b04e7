#!/usr/bin/env python3
"""Same-run Hugging Face transformers baseline for `qinfer bench latency` (issue #4: every speed target is recorded
beside what the default Python stack does on the same machine in the same call).

Runs on the GPU machine (torch + transformers + CUDA). The model is the Qwen3 config alone with random bf16 weights
initialised on the GPU (`AutoModelForCausalLM.from_config`, as `qinfer --load-format dummy`; speed does not depend
on the values), SDPA attention, `generate` with greedy decoding and its default dynamic KV cache: what a user of the
default stack gets. For each case (batch B, prompt L random token ids, N new tokens, EOS ignored):

- TTFT = wall time of `generate(max_new_tokens=1)` (prefill plus the first token), prefill tok/s = B * L / TTFT;
- decode tok/s per sequence = (N - 1) / (time of `generate(max_new_tokens=N)` - TTFT), aggregate = B times that.

Each timing is the median of --repeats runs after one warm-up. Prints one line per case and writes a JSON list.

    python3 tools/hf_baseline.py --config configs/Qwen3-4B-Instruct-2507 --out $OUT/hf_baseline.json
"""
import argparse
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def parse_case(text):
    try:
        batch, input_len, output_len = (int(part) for part in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"case '{text}': expected BATCHxINPUTxOUTPUT, e.g. 1x1024x128")
    if batch < 1 or input_len < 1 or output_len < 2:
        raise argparse.ArgumentTypeError(f"case '{text}': batch and input >= 1, output >= 2")
    return batch, input_len, output_len


def timed_generate(model, input_ids, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if out.shape[1] != input_ids.shape[1] + new_tokens:
        sys.exit(f"generate returned {out.shape[1] - input_ids.shape[1]} new tokens, expected {new_tokens}")
    return elapsed


def run_case(model, vocab_size, batch, input_len, output_len, repeats):
    generator = torch.Generator(device="cuda").manual_seed(batch * 100003 + input_len)
    input_ids = torch.randint(1, vocab_size, (batch, input_len), device="cuda", generator=generator)
    timed_generate(model, input_ids, 2)  # warm-up: kernels, allocator, cache classes
    ttft = statistics.median(timed_generate(model, input_ids, 1) for _ in range(repeats))
    total = statistics.median(timed_generate(model, input_ids, output_len) for _ in range(repeats))
    decode_per_sequence = (output_len - 1) / (total - ttft)
    return {
        "batch": batch,
        "input_len": input_len,
        "output_len": output_len,
        "ttft_seconds": ttft,
        "prefill_tokens_per_second": batch * input_len / ttft,
        "decode_tokens_per_second_per_sequence": decode_per_sequence,
        "decode_tokens_per_second": batch * decode_per_sequence,
        "decode_step_seconds": 1 / decode_per_sequence,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="directory holding the model's config.json")
    parser.add_argument("--cases", nargs="+", type=parse_case, default=[(1, 1024, 128), (1, 8192, 16), (64, 512, 128)],
                        help="BATCHxINPUTxOUTPUT (default: 1x1024x128 1x8192x16 64x512x128)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="JSON report")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: the baseline runs on the GPU machine")

    config = AutoConfig.from_pretrained(args.config)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.eval()
    model.generation_config.eos_token_id = None  # random prompts: every case yields exactly N tokens
    environment = {"transformers": transformers.__version__, "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name(0), "attention": "sdpa", "dtype": "bfloat16"}
    print(f"HF baseline: transformers {environment['transformers']}, torch {environment['torch']}, "
          f"{environment['gpu']}, bf16, sdpa, generate (greedy, dynamic cache)")
    results = []
    with torch.inference_mode():
        for batch, input_len, output_len in args.cases:
            result = run_case(model, config.vocab_size, batch, input_len, output_len, args.repeats)
            results.append(result)
            print(f"hf b{batch} {input_len}+{output_len}: prefill {result['prefill_tokens_per_second'] / 1e3:.1f}K "
                  f"tok/s, TTFT {result['ttft_seconds'] * 1e3:.1f} ms, decode "
                  f"{result['decode_tokens_per_second']:.0f} tok/s ({result['decode_step_seconds'] * 1e3:.2f} "
                  f"ms/step)", flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"environment": environment, "cases": results}, out, indent=1)


if __name__ == "__main__":
    main()
