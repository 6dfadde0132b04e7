#!/usr/bin/env python3
"""Reference data for the qinfer tokenizer from Hugging Face `tokenizers` (run on the GPU test machine, whose python3
has tokenizers 0.23.2 and transformers 5.17; needs no GPU).

usage: tokenizer_reference.py TOKENIZER_JSON CORPUS_DIR OUT_DIR [QINFER_BENCH_BINARY]

Writes to OUT_DIR:
  expected/<set>.tsv     one line per corpus document: token count, FNV-1a-64 of the ids (int32 little-endian),
                         FNV-1a-64 of decode(ids, skip_special_tokens=False) and of decode(..., True) (UTF-8 bytes),
                         then the same count and id hash with special-token matching off (encode_special_tokens=True)
  expected/<set>_ids.jsonl full ids, both modes, and both decodes for every document of corpus/<set>.jsonl, for the
                         short sets edge and nel_bom (U+0085 / U+FEFF around words, spaces and newlines)
  expected/decode_random.jsonl random id sequences (fixed seed) and HF's decodes of them, both skip settings
  hf_speed.json          HF single-thread encode MB/s on english/chinese/code, load time, 30-char prompt latency
  qinfer_bench.txt       output of the qinfer tokenizer benchmark run on the same machine (when given)
"""
import json
import os
import random
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # HF single-thread numbers
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402
import tokenizers  # noqa: E402

# Short edge-case sets whose full ids (not only hashes) are written, so a mismatch shows the exact tokens.
FULL_ID_SETS = ("edge", "nel_bom")
FNV_OFFSET, FNV_PRIME, MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def ids_hash(ids):
    return fnv1a64(b"".join(i.to_bytes(4, "little") for i in ids))


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def encode(tok, text, special):
    tok.encode_special_tokens = not special
    return tok.encode(text).ids


def main():
    tokenizer_json, corpus_dir, out_dir = sys.argv[1:4]
    bench = sys.argv[4] if len(sys.argv) > 4 else None
    os.makedirs(os.path.join(out_dir, "expected"), exist_ok=True)
    tok = Tokenizer.from_file(tokenizer_json)

    sets = sorted(f[:-6] for f in os.listdir(corpus_dir) if f.endswith(".jsonl"))
    docs_by_set = {name: read_docs(os.path.join(corpus_dir, name + ".jsonl")) for name in sets}
    for name, docs in docs_by_set.items():
        with open(os.path.join(out_dir, "expected", name + ".tsv"), "w") as f:
            for doc in docs:
                ids = encode(tok, doc, True)
                ids_ns = encode(tok, doc, False)
                keep = tok.decode(ids, skip_special_tokens=False).encode()
                skip = tok.decode(ids, skip_special_tokens=True).encode()
                f.write(f"{len(ids)}\t{ids_hash(ids):016x}\t{fnv1a64(keep):016x}\t{fnv1a64(skip):016x}\t"
                        f"{len(ids_ns)}\t{ids_hash(ids_ns):016x}\n")
        print(f"reference: {name}: {len(docs)} docs", file=sys.stderr)

    for name in FULL_ID_SETS:
        with open(os.path.join(out_dir, "expected", name + "_ids.jsonl"), "w") as f:
            for doc in docs_by_set.get(name, []):
                ids = encode(tok, doc, True)
                record = {"ids": ids, "ids_no_special": encode(tok, doc, False),
                          "decode": tok.decode(ids, skip_special_tokens=False),
                          "decode_skip": tok.decode(ids, skip_special_tokens=True)}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")

    rng = random.Random(7)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    with open(os.path.join(out_dir, "expected", "decode_random.jsonl"), "w") as f:
        for _ in range(300):
            ids = [rng.randrange(vocab + 5) if rng.random() < 0.9 else rng.randrange(151640, vocab)
                   for _ in range(rng.randint(1, 24))]
            # Single bytes and UTF-8 lead/continuation tokens stress the lossy decode.
            ids += [rng.randrange(0, 256) for _ in range(rng.randint(0, 4))]
            record = {"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                      "text_skip": tok.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")

    speed = {"tokenizers_version": tokenizers.__version__, "vocab_size_with_added": vocab}
    try:
        import transformers
        from transformers import PreTrainedTokenizerFast
        speed["transformers_version"] = transformers.__version__
        fast = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
        edge = docs_by_set.get("edge", [])
        tok.encode_special_tokens = False
        speed["transformers_agrees_on_edge"] = sum(fast.encode(d) == tok.encode(d).ids for d in edge)
        speed["edge_docs"] = len(edge)
    except Exception as e:  # noqa: BLE001 - a missing transformers must not lose the tokenizers data
        speed["transformers_error"] = repr(e)
    with open("/proc/cpuinfo") as f:
        speed["cpu"] = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")

    loads = []
    for _ in range(5):
        t0 = time.perf_counter()
        Tokenizer.from_file(tokenizer_json)
        loads.append(time.perf_counter() - t0)
    speed["load_ms_best_of_5"] = min(loads) * 1e3
    speed["load_ms_first"] = loads[0] * 1e3
    tok.encode_special_tokens = False
    for name in ("english", "chinese", "code"):
        docs = docs_by_set[name]
        total = sum(len(d.encode()) for d in docs)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for d in docs:
                tok.encode(d)
            best = min(best, time.perf_counter() - t0)
        speed[f"{name}_MBps"] = total / best / 1e6
        speed[f"{name}_bytes"] = total
    prompt = "What is the capital of France?"
    samples = []
    for _ in range(2000):
        t0 = time.perf_counter()
        tok.encode(prompt)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    speed["prompt30_us_median"] = samples[len(samples) // 2] * 1e6
    with open(os.path.join(out_dir, "hf_speed.json"), "w") as f:
        json.dump(speed, f, indent=1)
    print(json.dumps(speed, indent=1), file=sys.stderr)

    if bench:
        result = subprocess.run([bench, "--tokenizer", tokenizer_json, "--corpus", corpus_dir], capture_output=True,
                                text=True, timeout=120)
        with open(os.path.join(out_dir, "qinfer_bench.txt"), "w") as f:
            f.write(result.stdout + result.stderr)
        print(result.stdout, file=sys.stderr)


if __name__ == "__main__":
    main()
