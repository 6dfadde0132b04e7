#!/usr/bin/env python3
"""Reference outputs of the fp8 (E4M3) KV cache's semantics for qinfer's generated tiny test model.

transformers has no fp8 KV cache, so this is an independent numpy implementation of transformers' Qwen3 forward
(float32, eager attention: the math of tools/hf_reference.py's reference) in which K and V are rounded after RoPE to
E4M3 per (token, KV head) vector with scale amax / 448, as qinfer's cache stores them (util/fp8.h), and read back as
value * scale. It records greedy decoding in the same form as tests/data/hf_reference: per step the chosen token, the
top-5 log-probabilities and the top-2 margin.

It is tied to transformers: run first without the rounding, it must reproduce tests/data/hf_reference/tiny.json (every
greedy token, top-5 log-probabilities within 1e-4), or it stops. Runs anywhere with numpy (Debian: python3-numpy):

    python3 tools/fp8_reference.py --qinfer build/src/cli/qinfer --out tests/data/fp8_reference

tests/backend/test_hf_parity.cpp replays the JSON against the CPU backend with --kv-cache-dtype fp8. The tiny model
has 4 layers: deep random models amplify a single flipped E4M3 code (fp32-level differences before the rounding) into
percent-level logit changes (measured on the 4B shape on the H200, 2026-11-30), 4 layers leave them at about 1e-4.
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

import numpy as np

PRESET = "tiny"
STEPS = 24
TOP = 5
E4M3_MAX = np.float32(448.0)


def load_bf16_safetensors(path):
    """name -> float32 array of a safetensors file whose tensors are all bf16."""
    raw = open(path, "rb").read()
    header_len = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + header_len])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "BF16":
            raise ValueError(f"{path}: tensor {name} is {meta['dtype']}, expected BF16")
        begin, end = meta["data_offsets"]
        bits = np.frombuffer(raw[8 + header_len + begin: 8 + header_len + end], dtype=np.uint16).astype(np.uint32)
        tensors[name] = (bits << 16).view(np.float32).reshape(meta["shape"])
    return tensors


def e4m3_grid():
    """Every finite non-negative E4M3 value, ascending; the index of a value is its code."""
    values = []
    for exponent in range(16):
        for mantissa in range(8):
            if exponent == 15 and mantissa == 7:
                continue  # NaN
            values.append(mantissa * 2.0 ** -9 if exponent == 0 else (8 + mantissa) * 2.0 ** (exponent - 10))
    return np.array(values)


GRID = e4m3_grid()


def round_to_e4m3(x):
    """Nearest E4M3 value, ties to the even code; magnitudes from 448 up saturate."""
    magnitude = np.abs(x.astype(np.float64))
    upper = np.clip(np.searchsorted(GRID, magnitude), 1, len(GRID) - 1)  # GRID[upper - 1] < magnitude <= GRID[upper]
    low, high = GRID[upper - 1], GRID[upper]
    take_high = (high - magnitude < magnitude - low) | ((high - magnitude == magnitude - low) & (upper % 2 == 0))
    rounded = np.where(magnitude >= GRID[-1], GRID[-1], np.where(take_high, high, low))
    return (np.sign(x) * rounded).astype(np.float32)


def fp8_round_trip(x):
    """x [..., head_dim] float32 as qinfer's fp8 cache stores and reads it: per vector e4m3(x * (448 / amax)) * (amax /
    448) in float32; all-zero vectors stay zero."""
    amax = np.abs(x).max(axis=-1, keepdims=True)
    safe = np.where(amax > 0, amax, np.float32(1))
    inverse = np.where(amax > 0, E4M3_MAX / safe, np.float32(0)).astype(np.float32)
    stored = round_to_e4m3((x * inverse).astype(np.float32))
    return (stored * (amax / E4M3_MAX)).astype(np.float32)


class Qwen3:
    """transformers' Qwen3ForCausalLM in float32 over a KV cache that holds K/V as the model reads them back."""

    def __init__(self, model_dir, fp8_kv):
        self.c = json.load(open(os.path.join(model_dir, "config.json")))
        self.w = load_bf16_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.fp8_kv = fp8_kv
        dim = self.c["head_dim"]
        exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
        self.inv_freq = (np.float32(1.0) / np.float32(self.c["rope_theta"]) ** exponents).astype(np.float32)
        self.head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])

    def rms_norm(self, x, name):
        variance = (x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True).astype(np.float32)
        return self.w[name] * (x / np.sqrt(variance + np.float32(self.c["rms_norm_eps"]))).astype(np.float32)

    def rope(self, x, positions):  # x [tokens, heads, dim], rotate-half
        half = x.shape[-1] // 2
        freqs = np.outer(positions.astype(np.float32), self.inv_freq).astype(np.float32)
        angles = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return (x * cos + rotated * sin).astype(np.float32)

    def forward(self, ids, cache):
        """Log-probabilities [vocab] after `ids` (appended to `cache`: per layer lists of K and V arrays)."""
        c = self.c
        heads, kv_heads, dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        start = cache[0][0].shape[0] if cache[0][0] is not None else 0
        tokens = len(ids)
        positions = np.arange(start, start + tokens)
        x = self.w["model.embed_tokens.weight"][ids]
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = self.rms_norm(x, p + "input_layernorm.weight")
            q = self.rms_norm((h @ self.w[p + "self_attn.q_proj.weight"].T).reshape(tokens, heads, dim),
                              p + "self_attn.q_norm.weight")
            k = self.rms_norm((h @ self.w[p + "self_attn.k_proj.weight"].T).reshape(tokens, kv_heads, dim),
                              p + "self_attn.k_norm.weight")
            v = (h @ self.w[p + "self_attn.v_proj.weight"].T).reshape(tokens, kv_heads, dim)
            q, k = self.rope(q, positions), self.rope(k, positions)
            if self.fp8_kv:
                k, v = fp8_round_trip(k), fp8_round_trip(v)
            keys, values = cache[layer]
            keys = k if keys is None else np.concatenate([keys, k])
            values = v if values is None else np.concatenate([values, v])
            cache[layer] = (keys, values)
            group = heads // kv_heads
            out = np.empty((tokens, heads, dim), np.float32)
            visible = np.arange(start + tokens)[None, :] <= positions[:, None]  # causal
            for head in range(heads):
                scores = (q[:, head] @ keys[:, head // group].T) * np.float32(dim ** -0.5)
                scores = np.where(visible, scores, -np.inf)
                weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
                out[:, head] = (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32) @ values[:, head // group]
            x = x + out.reshape(tokens, heads * dim) @ self.w[p + "self_attn.o_proj.weight"].T
            h = self.rms_norm(x, p + "post_attention_layernorm.weight")
            gate = h @ self.w[p + "mlp.gate_proj.weight"].T
            up = h @ self.w[p + "mlp.up_proj.weight"].T
            x = x + ((gate / (1 + np.exp(-gate))) * up).astype(np.float32) @ self.w[p + "mlp.down_proj.weight"].T
        logits = (self.rms_norm(x[-1:], "model.norm.weight") @ self.head.T)[0].astype(np.float64)
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum()), logits


def greedy(model, prompt):
    cache = [(None, None)] * model.c["num_hidden_layers"]
    logprobs, logits = model.forward(np.array(prompt), cache)
    steps = []
    for _ in range(STEPS):
        top = np.argsort(-logprobs, kind="stable")[:TOP]
        token = int(np.argmax(logits))
        ordered = np.sort(logits)[::-1]
        steps.append({"token": token, "top_ids": [int(i) for i in top],
                      "top_logprobs": [float(logprobs[i]) for i in top], "margin": float(ordered[0] - ordered[1])})
        logprobs, logits = model.forward(np.array([token]), cache)
    return steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--qinfer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--hf-reference", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                               "hf_reference", PRESET + ".json"))
    args = parser.parse_args()
    hf = json.load(open(args.hf_reference))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.qinfer, "make-test-model", "--out", tmp, "--preset", PRESET, "--seed",
                        str(hf["weight_seed"])], check=True, capture_output=True)
        plain, fp8 = Qwen3(tmp, fp8_kv=False), Qwen3(tmp, fp8_kv=True)
        cases = []
        for case in hf["cases"]:
            prompt = case["prompt"]
            ours = greedy(plain, prompt)
            for step, (a, b) in enumerate(zip(ours, case["steps"][:STEPS])):
                if a["token"] != b["token"] or a["top_ids"] != b["top_ids"] or \
                        max(abs(x - y) for x, y in zip(a["top_logprobs"], b["top_logprobs"])) > 1e-4:
                    raise SystemExit(f"prompt of {len(prompt)} tokens, step {step}: this forward does not reproduce "
                                     f"transformers ({a} vs {b}); not a reference")
            cases.append({"prompt": prompt, "steps": greedy(fp8, prompt)})
            print(f"prompt of {len(prompt)} tokens: transformers reproduced, fp8 reference written", flush=True)
    os.makedirs(args.out, exist_ok=True)
    report = {"preset": PRESET, "weight_seed": hf["weight_seed"], "kv_cache_dtype": "fp8", "steps": STEPS,
              "made_with": {"command": "python3 tools/fp8_reference.py --qinfer build/src/cli/qinfer --out "
                                       "tests/data/fp8_reference", "numpy": np.__version__,
                            "reproduces": f"tests/data/hf_reference/{PRESET}.json (transformers "
                                          f"{hf['made_with']['transformers']}, float32) without the rounding"},
              "cases": cases}
    with open(os.path.join(args.out, PRESET + ".json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
