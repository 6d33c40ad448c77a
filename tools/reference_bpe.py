#!/usr/bin/python3
"""An independent reference for our byte-level BPE (inference/tokenizer/bpe_tokenizer.cpp).

What is independent: this file trains its own tiny vocabulary (its own corpus,
its own token order: GPT-2's printable-bytes-first order, unlike the C++
builder), spells bytes with its own bytes_to_unicode, pre-splits with Python's
`re`, and merges with the original GPT-2 bpe() loop (merge every occurrence of
the best-ranked bigram), not the C++ heap algorithm. What is not: the same
author wrote both, from the same published descriptions. Python's `re` has no
\\p{L}/\\p{N} and the `regex` module is not installed, so the pre-split
regexes below are the published patterns with \\p{L} -> [A-Za-z] and \\p{N} ->
[0-9]: exact for ASCII text only, hence the samples are ASCII.

Writes tests/data/tokenizer/gpt2_small.{vocab,merges,expected}.txt:
  vocab:    one token per line (type<TAB>token); merges: "a b" per line, by rank;
  expected: pre<TAB>hex(text)<TAB>ids (no BOS, no special-token parsing).
"""
import os
import re
from collections import Counter

CORPUS = """\
It's the robot's job to count, and it won't stop: 1, 22, 333, 4444, 55555.
They'll say we'd done it; I'm sure you've seen it. DON'T SHOUT, IT'S LOUD!
    for (int i = 0; i < 10; ++i) {
        total += values[i] * weights[i];
    }
    return total;
<html><body class="main">hello world</body></html>
path/to/file.txt and C:\\\\Windows\\\\system32 and https://example.com/?q=1&x=2
"""

SAMPLES = [
    "Hello world",
    "It's the robot's job, isn't it?",
    "DON'T SHOUT, IT'S LOUD!",
    "count 1234567 and 89",
    "    for (int i = 0; i < 10; ++i) {\n        total += 1;\n    }\n",
    "  multiple   spaces  ",
    "a\n\nb\r\nc",
    "path/to/file.txt",
    "<html><body>ok</body></html>",
    "x=1;y=22;z=333;",
]

PATTERNS = {
    # openai/gpt-2 src/encoder.py
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""",
    # Qwen2 tokenizer.json pre_tokenizer
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    # meta-llama/llama3 tokenizer.py
    "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
NUM_MERGES = 200  # count-1 pairs included: whole words become tokens too


def bytes_to_unicode():
    """GPT-2's table: printable bytes keep their code point, the rest get 256+n."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return keep + [b for b in range(256) if b not in keep], table


BYTE_ORDER, B2U = bytes_to_unicode()


def spell(piece: str) -> str:
    return "".join(B2U[b] for b in piece.encode("utf-8"))


def train():
    words = Counter(tuple(spell(w)) for w in re.findall(PATTERNS["gpt2"], CORPUS))
    words = {tuple(w): c for w, c in words.items()}
    merges = []
    while len(merges) < NUM_MERGES:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        new_words = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return merges


def gpt2_bpe(word, ranks):
    """The loop of openai/gpt-2 encoder.py bpe(), rewritten."""
    word = list(word)
    while len(word) > 1:
        pairs = {(a, b) for a, b in zip(word, word[1:])}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                out.append(word[i] + word[i + 1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        word = out
    return word


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer")
    merges = train()
    tokens = [B2U[b] for b in BYTE_ORDER]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    types = [1] * len(tokens) + [3] * len(SPECIALS)
    tokens += SPECIALS
    ids = {t: i for i, t in enumerate(tokens)}
    ranks = {m: r for r, m in enumerate(merges)}
    with open(os.path.join(out_dir, "gpt2_small.vocab.txt"), "w", encoding="utf-8") as f:
        for t, ty in zip(tokens, types):
            f.write(f"{ty}\t{t}\n")
    with open(os.path.join(out_dir, "gpt2_small.merges.txt"), "w", encoding="utf-8") as f:
        for a, b in merges:
            f.write(f"{a} {b}\n")
    with open(os.path.join(out_dir, "gpt2_small.expected.txt"), "w", encoding="utf-8") as f:
        for pre, pattern in PATTERNS.items():
            for text in SAMPLES:
                out = []
                for piece in re.findall(pattern, text):
                    out += [ids[t] for t in gpt2_bpe(spell(piece), ranks)]
                f.write(f"{pre}\t{text.encode('utf-8').hex()}\t{' '.join(map(str, out))}\n")


if __name__ == "__main__":
    main()
