#!/usr/bin/env python3
"""Diff moechat's per-layer hidden states against the reference's, layer by layer.

    build/app/moechat-cli logits MODEL --tokens 1,2,3 --dump-hidden ours.txt
    /usr/bin/python3 tools/reference/moe_reference.py MODEL --tokens 1 2 3 --dump-hidden ref.npz
    /usr/bin/python3 tools/reference/compare_hidden.py ours.txt ref.npz

Prints, per hidden index (0 = embeddings, L+1 = after layer L), the largest
|ours - ref| relative to max |ref|: the first layer where it jumps is where to look.
"""
import sys
from collections import defaultdict

import numpy as np


def read_ours(path):
    rows = defaultdict(dict)
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.split()
            index = int(parts[0].split("_")[1])
            rows[index][int(parts[2])] = np.array([float(x) for x in parts[3:]])
    return {i: np.stack([r[p] for p in sorted(r)]) for i, r in rows.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours = read_ours(sys.argv[1])
    ref = np.load(sys.argv[2])
    worst = 0.0
    for i in sorted(ours):
        r = ref[f"hidden_{i}"]
        o = ours[i]
        if o.shape != r.shape:
            sys.exit(f"hidden_{i}: shape {o.shape} vs reference {r.shape}")
        rel = float(np.max(np.abs(o - r)) / max(np.max(np.abs(r)), 1e-30))
        worst = max(worst, rel)
        print(f"hidden_{i}: max|diff|/max|ref| = {rel:.3e}")
    print(f"worst {worst:.3e}")


if __name__ == "__main__":
    main()
