#!/usr/bin/env python3
"""Counts the #include arrows between the tree's folders of product code and checks
that none points up: prints one line per arrow (from -> to: how many includes), in
the order of the layers, top to bottom, and exits 1 naming any arrow that goes up.

Run from the repository root: python3 tools/layers/include_arrows.py
"""
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tree import quoted_includes, tracked_files  # noqa: E402 (beside this script)

# Top to bottom; a folder may include only folders below it (and itself).
# offload/trainer is a library of its own above the runtime: it runs whole models to trace and
# evaluate predictors.
LAYERS = ["desktop", "ui", "app/qt", "app/cli", "app/core", "offload/trainer", "runtime", "offload",
          "inference", "synth", "quant", "models"]
# Side by side (neither above the other): no arrow between them in either direction.
PEERS = {frozenset({"app/qt", "app/cli"})}



def layer_of(path):
    for layer in LAYERS:
        if path == layer or path.startswith(layer + "/"):
            return layer
    return None


def main():
    files = tracked_files(["*.cpp", "*.h", "*.cu", "*.cuh", "*.inc"])
    arrows = Counter()
    for path in files:
        src = layer_of(path)
        if src is None:
            continue  # tests/, tools/, bench/: not product code
        for included in quoted_includes(path):
            dst = layer_of(included)
            if dst is not None and dst != src:
                arrows[(src, dst)] += 1
    up = []
    for (src, dst), n in sorted(arrows.items(), key=lambda a: (LAYERS.index(a[0][0]), LAYERS.index(a[0][1]))):
        wrong = LAYERS.index(dst) < LAYERS.index(src) or frozenset({src, dst}) in PEERS
        print(f"{src:15} -> {dst:15} {n:4}{'  UP' if wrong else ''}")
        if wrong:
            up.append(f"{src} -> {dst}")
    if up:
        print("arrows going up: " + ", ".join(up), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
