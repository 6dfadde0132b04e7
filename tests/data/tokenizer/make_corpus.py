#!/usr/bin/env python3
"""Builds the tokenizer test corpus (tests/data/tokenizer/corpus/*.jsonl) from freely licensed text installed on a
Debian 12 machine plus generated edge cases. Deterministic for the same installed packages. See README.md."""
import glob
import gzip
import json
import os
import random
import subprocess
import sys
import unicodedata
from functools import cache

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
CHUNK = 3000  # characters per document, cut at a paragraph boundary


def render_man(path):
    env = dict(os.environ, MANWIDTH="100", LANG="C.UTF-8")
    try:  # a few pages make troff loop for minutes; skip them
        text = subprocess.run(["man", "-l", path], capture_output=True, env=env, timeout=10).stdout
    except subprocess.TimeoutExpired:
        return ""
    text = subprocess.run(["col", "-b"], input=text, capture_output=True).stdout
    return text.decode("utf-8", "replace")


def chunks(text, limit=CHUNK):
    out, current = [], ""
    for para in text.split("\n\n"):
        if current and len(current) + len(para) > limit:
            out.append(current)
            current = ""
        current += para + "\n\n"
    if current.strip():
        out.append(current)
    return out


def collect(paths, reader, budget):
    docs, total = [], 0
    for path in paths:
        for chunk in chunks(reader(path)):
            docs.append(chunk)
            total += len(chunk.encode())
        if total >= budget:
            break
    return docs


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


@cache
def english():
    licenses = [f"/usr/share/common-licenses/{n}" for n in ("GPL-3", "Apache-2.0", "GFDL-1.3", "MPL-2.0", "LGPL-2.1")]
    docs = collect(licenses, read_text, 10**9)
    docs += collect(sorted(glob.glob("/usr/share/man/man7/*.7.gz")), render_man, 600_000)
    return docs


@cache
def chinese():
    pages = sorted(glob.glob("/usr/share/man/zh_CN/man1/*.gz")) + sorted(glob.glob("/usr/share/man/zh_CN/man8/*.gz"))
    return collect(pages, render_man, 560_000)


def code():
    headers = sorted(glob.glob("/usr/include/c++/12/bits/*.h"))[:40] + ["/usr/include/nlohmann/json.hpp"]
    return collect(headers, read_text, 600_000)


def other_scripts():
    docs = []
    for lang in ("ru", "ja", "ko", "de", "fr", "pl", "uk", "zh_TW"):
        pages = sorted(glob.glob(f"/usr/share/man/{lang}/man1/*.gz"))[:6]
        docs += collect(pages, render_man, 40_000)
    return docs


def edge_cases():
    rng = random.Random(1234)
    cases = [
        "", " ", "  ", "\n", "\r\n", "\r\n\r\n", " \n ", "\t\t\n\t", "a  b   c    d", "end   ", "   start",
        "Hello, world!", "hello world\n\n\n   indented\r\n\ttab", "x\u00a0y\u3000z\u2028w\u2029v\u0085u",
        "1234567890123456789012345678901234567890", "3.14159 2,718 1e-9 0x1F 1_000_000", "٣٤٥ ४५६ ໑໒໓ Ⅻ ½ ²³",
        "I'm you're we've they'll she'd it's don't", "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T",
        "i'M yOu'Re We'Ve tHeY'lL sHe'D iT's DoN't", "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
        "'ſ 'ſt it'ſ Kelvin'K", "''s '''ll 's's", "rock'n'roll O'Neil",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|><|endoftext|>",
        "<think>\n\n</think>\n\n", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "<tool_response>ok</tool_response>", "<|im_start", "<|im_end|", "im_end|>", "<<|im_end|>>", "<|im_end|><|im_end|>",
        "text<|im_end|>text", " <|im_end|> ", "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>c", "<|vision_pad|>",
        "e\u0301 a\u0300 o\u0308 n\u0303", "Cafe\u0301 re\u0301sume\u0301", "\u1100\u1161\u11a8 \u1112\u1161\u11ab",
        "Vie\u0323\u0302t Nam", "\u212b \u2126 \u00c5", "q\u0307\u0323 \u0041\u030a", "\u0301leading mark",
        "👍 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇺🇸 ❤️ 🧑🏿‍💻", "emoji👍inside", "🙂🙂🙂🙂", "\U0001F600\U0001F601 \U0001FA70",
        "नमस्ते दुनिया", "مرحبا بالعالم", "שלום עולם", "Привет, мир!", "こんにちは世界", "안녕하세요 세계", "สวัสดีชาวโลก",
        "ελληνικά Ωμέγα", "ქართული", "Ꭰ Ꭱ Ꭲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛", "中文，标点。“引号”！？", "混合English和中文123",
        "def f(x):\n    return x**2  # comment\n", "int main() { return 0; }\r\n", "a=b+c;d-=e*f/g%h",
        "https://example.com/path?q=1&r=2#frag", "foo@bar.baz", "C:\\Users\\name\\file.txt", "$HOME ~/.bashrc",
        "!!!???...,,,;;;", "---===+++***", " !@#$%^&*()", "..\n\n..\r\n", "a\n\n\nb", "\u200b\u200c\u200d\ufeff",
        "\x00\x01\x02\x1f\x7f", "tab\there", "\u00ad soft hyphen", "ﬁ ﬂ ﬀ ligatures", "Ａ Ｂ Ｃ fullwidth",
    ]
    pieces = ["hello", "World", " ", "  ", "\n", "\r\n", "\t", "123", "4", "'s", "'LL", "中文", "😀", "👨‍👩‍👧",
              "e\u0301", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "!", "?.", "ſ", "ß",
              "\u00a0", "\u3000", "مرحبا", "ｶﾀｶﾅ", "१२३", "—", "…", "\u0300"]
    for _ in range(400):
        cases.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))
    for _ in range(60):
        cases.append(" " * rng.randint(1, 40) + "x" + "\n" * rng.randint(0, 5) + " " * rng.randint(0, 9))
        cases.append("".join(str(rng.randint(0, 9)) for _ in range(rng.randint(1, 200))))
    return cases


def nel_bom_cases():
    """U+0085 (NEL) and U+FEFF (BOM) in every position the split regex cares about. Oniguruma's \\s (HF) includes NEL
    and excludes BOM; JavaScript's \\s (the @lenml/tokenizers fuzz reference) does the opposite, so only HF decides."""
    cases = []
    for ch in ("\u0085", "\ufeff"):
        cases += [
            ch, ch * 2, ch * 5, "a" + ch + "b", "a " + ch + "b", "a" + ch + " b", "a " + ch + " b", "word" + ch * 3 + "word",
            ch + "\n", "\n" + ch, ch + "\r\n", "\r\n" + ch, "a" + ch + "\nb", "a\n" + ch + "b", "a" + ch + "\n\n",
            " " + ch + "\n", "\n" + ch + " ", "\n" + ch + "\n", ch + "\n" + ch, ch + " ", " " + ch, "  " + ch + "  ",
            ch + "   x", "x   " + ch, "x " + ch + "  y", ch + "Hello", "Hello" + ch, ch + "Hello world" + ch,
            "!" + ch, ch + "!", "!" + ch + "?", "." + ch + "\n", "1" + ch + "2", ch + "123", "it" + ch + "'s",
            ch + "'s", "\u4e2d" + ch + "\u6587", "\t" + ch + "\t", "\u00a0" + ch, ch + "\u3000", "\u2028" + ch,
            "<|im_end|>" + ch, ch + "<|im_start|>", (" " + ch) * 4, (ch + "\n") * 3, ch + "\u0301", "e" + ch + "\u0301",
        ]
    cases += ["\u0085\ufeff", "\ufeff\u0085", " \u0085\ufeff ", "a\u0085\ufeffb", "a\ufeff\u0085b",
              "\ufeff\ufeff\u0085\u0085 x", "x\n\u0085\ufeff\n"]
    rng = random.Random(85)
    pieces = ["\u0085", "\ufeff", " ", "  ", "\n", "\r\n", "\t", "a", "Word", "1", "!", "\u4e2d", "'s", "\u00a0",
              "<|im_end|>"]
    for _ in range(200):
        cases.append("".join(rng.choice(pieces) for _ in range(rng.randint(2, 10))))
    return cases


def mixed(english_docs, chinese_docs):
    """Long mixed documents: all edge-case features in bigger stretches (emoji ZWJ runs, NFD text, \\r\\n, digits)."""
    rng = random.Random(99)
    base = chinese_docs[:60] + english_docs[-60:]
    docs = []
    for i, doc in enumerate(base):
        if i % 3 == 0:
            doc = unicodedata.normalize("NFD", doc)
        if i % 4 == 1:
            doc = doc.replace("\n", "\r\n")
        words = doc.split(" ")
        for _ in range(len(words) // 20):
            k = rng.randrange(len(words))
            words[k] += rng.choice(["👨‍👩‍👧‍👦", "<|im_end|>", "'S", "  ", "1234567", "\t", "é", "🏳️‍🌈", "<think>"])
        docs.append(" ".join(words))
    return docs


def main():
    """usage: make_corpus.py [SET...] — writes the named sets (default: all)."""
    os.makedirs(OUT, exist_ok=True)
    builders = {"english": english, "chinese": chinese, "code": code, "other_scripts": other_scripts,
                "mixed": lambda: mixed(english(), chinese()), "edge": edge_cases, "nel_bom": nel_bom_cases}
    wanted = sys.argv[1:] or list(builders)
    unknown = [name for name in wanted if name not in builders]
    if unknown:
        sys.exit(f"unknown set(s) {unknown}; known: {list(builders)}")
    sets = {name: builders[name]() for name in wanted}
    total = 0
    for name, docs in sets.items():
        with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
        size = sum(len(d.encode()) for d in docs)
        total += size
        print(f"{name}: {len(docs)} docs, {size} bytes", file=sys.stderr)
    print(f"total {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
