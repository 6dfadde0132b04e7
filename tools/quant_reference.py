#!/usr/bin/env python3
"""Reference outputs for qinfer's quantized test checkpoints (AutoAWQ GEMM int4, GPTQ int4, block FP8).

For each format it asks qinfer to write the `tiny` test model quantized from its bf16 weights (make-test-model
--quantization; the same bytes on every machine), dequantizes the checkpoint here with numpy (an implementation of
each format's definition that shares no code with qinfer), and records greedy decoding on the prompts of
tests/data/hf_reference/tiny.json in that file's form (per step the token, the top-5 log-probabilities, the top-2
margin).

--engine numpy (runs anywhere with numpy; Debian: python3-numpy) runs tools/fp8_reference.py's float32 forward,
which must first reproduce tests/data/hf_reference/tiny.json from the bf16 checkpoint (tying it to transformers), on
the dequantized weights. Its outputs are committed:

    python3 tools/quant_reference.py --qinfer build/src/cli/qinfer --out tests/data/quant_reference

--engine transformers (the GPU machine: torch, transformers, no internet) runs transformers' Qwen3ForCausalLM in
float32 with eager attention on the same dequantized weights (tiny-FORMAT-transformers.json), and for FP8 also the
W8A8 forward the GPU kernels implement (tiny-fp8-w8a8.json): activations quantized per token in groups of 128 (scale
amax / 448, q = e4m3(x / scale)), products of the E4M3 codes accumulated in float32 and scaled per block. It first
tries transformers' own FP8 path (from_pretrained on the FP8 checkpoint); transformers 5 takes that path's kernels
from the `kernels` hub package, which an offline machine lacks, so it then falls back to a torch emulation of the
same arithmetic and records which one ran:

    python3 tools/quant_reference.py --engine transformers --qinfer build/src/cli/qinfer --out tests/data/quant_reference

tests/backend/test_hf_parity.cpp replays the float32 references against the CPU backend (the -transformers files when
present); the W8A8 one is for the GPU kernels, whose activations are quantized (the CPU reference keeps them fp32).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_reference  # noqa: E402  (the numpy Qwen3 forward and the E4M3 grid)

PRESET = "tiny"
FORMATS = ["awq", "gptq", "fp8"]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ packs column AWQ_ORDER[i] of each 8 into nibble i


def read_safetensors(path):
    """name -> numpy array, in the checkpoint's own dtype (BF16 as uint16 bits, F8_E4M3 as uint8 codes)."""
    raw = open(path, "rb").read()
    header_len = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + header_len])
    dtypes = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "F8_E4M3": np.uint8}
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        data = np.frombuffer(raw[8 + header_len + begin: 8 + header_len + end], dtype=dtypes[meta["dtype"]])
        tensors[name] = (meta["dtype"], data.reshape(meta["shape"]))
    return tensors


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def nibbles(words):
    """int32 [..., n] -> uint8 [..., n, 8], nibble i of each word at index i."""
    w = words.astype(np.uint32)[..., None]
    return ((w >> (4 * np.arange(8, dtype=np.uint32))) & 0xF).astype(np.int64)


def e4m3_value(code):
    exponent, mantissa = (code >> 3) & 0xF, (code & 7) / 8
    magnitude = mantissa * 2.0 ** -6 if exponent == 0 else (1 + mantissa) * 2.0 ** (exponent - 7)
    return -magnitude if code & 0x80 else magnitude


# Every E4M3 code's value (0x7f / 0xff, NaN in E4M3, read as 480 like the formula; checkpoints never hold them).
E4M3_VALUES = np.array([e4m3_value(code) for code in range(256)], np.float32)


def e4m3_to_f32(codes):
    """A table lookup: a 4B checkpoint holds 3.6e9 codes, too many for element-wise float64 arithmetic."""
    return E4M3_VALUES[codes]


def dequantize(tensors, config):
    """The checkpoint as float32 [out, in] weights under the dense names, every other tensor widened."""
    q = config["quantization_config"]
    out, done = {}, set()
    for name, (dtype, data) in tensors.items():
        module = name.rsplit(".", 1)[0]
        if module in done:
            continue
        if name.endswith(".qweight"):
            group = q["group_size"]
            zeros_packed, scales = tensors[module + ".qzeros"][1], tensors[module + ".scales"][1].astype(np.float32)
            if q["quant_method"] == "awq":
                ints = np.empty((data.shape[0], data.shape[1] * 8), np.int64)  # [in, out]
                zeros = np.empty((zeros_packed.shape[0], zeros_packed.shape[1] * 8), np.int64)
                data_nibbles, zero_nibbles = nibbles(data), nibbles(zeros_packed)
                for i, column in enumerate(AWQ_ORDER):
                    ints[:, column::8] = data_nibbles[..., i]
                    zeros[:, column::8] = zero_nibbles[..., i]
            else:
                offset = 1 if q.get("checkpoint_format", "gptq") == "gptq" else 0
                ints = nibbles(data).transpose(0, 2, 1).reshape(data.shape[0] * 8, data.shape[1])  # [in, out]
                zeros = nibbles(zeros_packed).reshape(zeros_packed.shape[0], -1) + offset
            groups = np.arange(ints.shape[0]) // group
            weight = ((ints - zeros[groups]).astype(np.float32) * scales[groups]).T
            out[module + ".weight"] = np.ascontiguousarray(weight, dtype=np.float32)
            done.add(module)
        elif dtype == "F8_E4M3":
            block_out, block_in = q["weight_block_size"]
            scale = tensors[module + ".weight_scale_inv"][1].astype(np.float32)
            rows, cols = data.shape
            padded = np.zeros((scale.shape[0] * block_out, scale.shape[1] * block_in), np.float32)
            padded[:rows, :cols] = e4m3_to_f32(data)
            blocks = padded.reshape(scale.shape[0], block_out, scale.shape[1], block_in) * scale[:, None, :, None]
            out[name] = np.ascontiguousarray(blocks.reshape(padded.shape)[:rows, :cols])
            done.add(module)
        elif name.endswith((".qzeros", ".scales", ".g_idx", ".weight_scale_inv")):
            continue
        else:
            out[name] = bf16_to_f32(data) if dtype == "BF16" else data.astype(np.float32)
    return out


def make_checkpoint(qinfer, directory, seed, quantization=None):
    command = [qinfer, "make-test-model", "--out", directory, "--preset", PRESET, "--seed", str(seed)]
    if quantization:
        command += ["--quantization", quantization]
    subprocess.run(command, check=True, capture_output=True)


def numpy_references(args, hf, tmp):
    bf16_dir = os.path.join(tmp, "bf16")
    make_checkpoint(args.qinfer, bf16_dir, hf["weight_seed"])
    plain = fp8_reference.Qwen3(bf16_dir, fp8_kv=False)
    for case in hf["cases"]:
        for step, (a, b) in enumerate(zip(fp8_reference.greedy(plain, case["prompt"]), case["steps"])):
            if a["token"] != b["token"] or max(abs(x - y) for x, y in zip(a["top_logprobs"], b["top_logprobs"])) > 1e-4:
                raise SystemExit(f"step {step}: the numpy forward does not reproduce transformers; not a reference")
    print("numpy forward reproduces tests/data/hf_reference/tiny.json", flush=True)
    results = {}
    for fmt in FORMATS:
        directory = os.path.join(tmp, fmt)
        make_checkpoint(args.qinfer, directory, hf["weight_seed"], fmt)
        config = json.load(open(os.path.join(directory, "config.json")))
        model = fp8_reference.Qwen3(directory, fp8_kv=False,
                                    weights=dequantize(read_safetensors(os.path.join(directory, "model.safetensors")), config))
        cases = [{"prompt": c["prompt"], "steps": fp8_reference.greedy(model, c["prompt"])} for c in hf["cases"]]
        results[f"{PRESET}-{fmt}.json"] = (fmt, cases, {"engine": "numpy float32 (tools/fp8_reference.py's forward)",
                                                        "numpy": np.__version__})
        print(f"{fmt}: reference written", flush=True)
    return results


def transformers_references(args, hf, tmp):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"

    @torch.no_grad()
    def greedy(model, prompt):
        past, ids, steps = None, torch.tensor([prompt], device=device), []
        for _ in range(fp8_reference.STEPS):
            out = model(input_ids=ids, past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[0, -1].double().cpu()
            logprobs = torch.log_softmax(logits, dim=-1)
            top = torch.topk(logprobs, fp8_reference.TOP)
            ordered = torch.sort(logits, descending=True).values
            token = int(torch.argmax(logits))
            steps.append({"token": token, "top_ids": [int(i) for i in top.indices],
                          "top_logprobs": [float(v) for v in top.values], "margin": float(ordered[0] - ordered[1])})
            ids = torch.tensor([[token]], device=device)
        return steps

    def dense_model(config, weights, dtype):
        plain = {k: v for k, v in config.items() if k != "quantization_config"}
        model = Qwen3ForCausalLM(Qwen3Config(**plain)).to(dtype)
        state = {k: torch.from_numpy(v) for k, v in weights.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or [m for m in missing if m != "lm_head.weight"]:
            raise SystemExit(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
        return model.to(device).eval()

    results = {}
    meta = {"engine": "transformers float32, eager attention", "torch": torch.__version__,
            "transformers": transformers.__version__, "device": device}
    for fmt in FORMATS:
        directory = os.path.join(tmp, fmt)
        make_checkpoint(args.qinfer, directory, hf["weight_seed"], fmt)
        config = json.load(open(os.path.join(directory, "config.json")))
        weights = dequantize(read_safetensors(os.path.join(directory, "model.safetensors")), config)
        model = dense_model(config, weights, torch.float32)
        model.config._attn_implementation = "eager"
        cases = [{"prompt": c["prompt"], "steps": greedy(model, c["prompt"])} for c in hf["cases"]]
        results[f"{PRESET}-{fmt}-transformers.json"] = (fmt, cases, meta)
        print(f"{fmt}: transformers reference written", flush=True)
        if fmt != "fp8":
            continue
        try:
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16, device_map=device)
            path = f"transformers {transformers.__version__} FP8 integration"
            cases = [{"prompt": c["prompt"], "steps": greedy(model, c["prompt"])} for c in hf["cases"]]
        except Exception as error:  # the hub kernels are missing offline: emulate the same arithmetic
            path = f"torch emulation of per-token-group W8A8 (transformers' FP8 path failed: {error!r})"
            model = w8a8_emulation(dense_model(config, weights, torch.bfloat16), read_safetensors(
                os.path.join(directory, "model.safetensors")), config, device)
            cases = [{"prompt": c["prompt"], "steps": greedy(model, c["prompt"])} for c in hf["cases"]]
        results[f"{PRESET}-fp8-w8a8.json"] = (fmt, cases, dict(meta, engine=path, dtype="bfloat16 activations"))
        print(f"fp8 W8A8 reference written ({path})", flush=True)
    return results


def w8a8_emulation(model, tensors, config, device):
    """Replaces every quantized linear of a bf16 model by the FP8 block W8A8 product: x quantized per token in groups
    of block_in (scale = amax / 448, q = e4m3(x / scale)), sum over k-blocks of (q_x . q_w) * s_x * s_w in float32."""
    import torch

    block_out, block_in = config["quantization_config"]["weight_block_size"]

    class W8A8Linear(torch.nn.Module):
        def __init__(self, codes, scale_inv):
            super().__init__()
            self.w = torch.from_numpy(e4m3_to_f32(codes)).to(device)  # the E4M3 values, exact in float32
            self.s = torch.from_numpy(scale_inv.astype(np.float32)).to(device)

        def forward(self, x):
            shape = x.shape
            x = x.reshape(-1, shape[-1]).float()
            out = torch.zeros(x.shape[0], self.w.shape[0], device=device)
            for kb in range(0, x.shape[1], block_in):
                xs = x[:, kb:kb + block_in]
                scale = xs.abs().amax(dim=1, keepdim=True) / 448.0
                q = torch.where(scale > 0, xs / scale, torch.zeros_like(xs)).to(torch.float8_e4m3fn).float()
                partial = q @ self.w[:, kb:kb + block_in].T
                w_scale = self.s[:, kb // block_in].repeat_interleave(block_out)[:self.w.shape[0]]
                out += partial * scale * w_scale
            return out.to(torch.bfloat16).reshape(*shape[:-1], -1)

    for name, module in list(model.named_modules()):
        key = f"{name}.weight"
        if isinstance(module, torch.nn.Linear) and key in tensors and tensors[key][0] == "F8_E4M3":
            parent = model.get_submodule(name.rsplit(".", 1)[0])
            setattr(parent, name.rsplit(".", 1)[1], W8A8Linear(tensors[key][1], tensors[f"{name}.weight_scale_inv"][1]))
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--qinfer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--engine", choices=["numpy", "transformers"], default="numpy")
    parser.add_argument("--hf-reference", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                               "hf_reference", PRESET + ".json"))
    args = parser.parse_args()
    hf = json.load(open(args.hf_reference))
    hf["cases"] = [dict(c, steps=c["steps"][:fp8_reference.STEPS]) for c in hf["cases"]]
    with tempfile.TemporaryDirectory() as tmp:
        results = (numpy_references if args.engine == "numpy" else transformers_references)(args, hf, tmp)
    os.makedirs(args.out, exist_ok=True)
    command = "python3 tools/quant_reference.py " + ("--engine transformers " if args.engine == "transformers" else "")
    for file_name, (fmt, cases, made_with) in results.items():
        report = {"preset": PRESET, "weight_seed": hf["weight_seed"], "quantization": fmt, "steps": fp8_reference.STEPS,
                  "made_with": dict(made_with, command=command + "--qinfer build/src/cli/qinfer --out "
                                                                "tests/data/quant_reference"),
                  "cases": cases}
        with open(os.path.join(args.out, file_name), "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
