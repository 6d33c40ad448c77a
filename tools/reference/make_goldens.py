#!/usr/bin/env python3
"""Write golden logits for the synthetic test models.

    /usr/bin/python3 tools/reference/make_goldens.py            # all tests/data/golden/*.gguf
    /usr/bin/python3 tools/reference/make_goldens.py llama qwen3moe
    /usr/bin/python3 tools/reference/make_goldens.py --compare tests/data/golden/llama.logits other.logits

For every tests/data/golden/<arch>.gguf this runs tools/reference/moe_reference.py
in float64 and writes tests/data/golden/<arch>.logits:

    # reference: tools/reference/moe_reference.py float64, model <arch>.gguf sha256 <hex>
    seq <n> <id1> ... <idn>
    pos 0 <n_vocab logits, %.9g, space separated>
    ...
    pos <n-1> ...
    seq ...

Token sequences (fixed rule, depends only on n_vocab):
    SEQ_LENGTHS = (1, 7, 16); sequence s (0-based), position j:
        id = (1 + 97*s + 37*j + 5*j*j) mod n_vocab
It also runs the same reference in float32 (same dequantised weights, float32
arithmetic) and prints the float32-vs-float64 gap, the smallest top-k routing
margin and whether any expert choice changed, so the tolerance for a float32
engine can be justified with measured numbers (see tests/data/golden/README.md).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import sys
from typing import List, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import moe_reference as M  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
GOLDEN_DIR = os.path.join(REPO, "tests", "data", "golden")
SEQ_LENGTHS = (1, 7, 16)


def token_sequences(n_vocab: int) -> List[List[int]]:
    return [[(1 + 97 * s + 37 * j + 5 * j * j) % n_vocab for j in range(n)]
            for s, n in enumerate(SEQ_LENGTHS)]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_logits(path: str, model_file: str, digest: str, seqs, logits) -> None:
    with open(path, "w") as f:
        f.write(f"# reference: tools/reference/moe_reference.py float64, model {model_file} sha256 {digest}\n")
        for toks, lg in zip(seqs, logits):
            f.write(f"seq {len(toks)} " + " ".join(str(t) for t in toks) + "\n")
            for p, row in enumerate(lg):
                f.write(f"pos {p} " + " ".join("%.9g" % v for v in row) + "\n")


def read_logits(path: str) -> Tuple[str, List[Tuple[List[int], np.ndarray]]]:
    """Parse the golden format; returns (header, [(tokens, logits (n, n_vocab))])."""
    out = []
    with open(path) as f:
        header = f.readline().rstrip("\n")
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        parts = lines[i].split()
        assert parts[0] == "seq", lines[i][:80]
        n = int(parts[1])
        toks = [int(x) for x in parts[2:2 + n]]
        assert len(toks) == n
        rows = []
        for p in range(n):
            q = lines[i + 1 + p].split()
            assert q[0] == "pos" and int(q[1]) == p
            rows.append([float(x) for x in q[2:]])
        out.append((toks, np.array(rows, dtype=np.float64)))
        i += 1 + n
    return header, out


def gap_stats(ref: List[np.ndarray], test: List[np.ndarray]) -> dict:
    a = np.concatenate(ref)
    b = np.concatenate(test)
    d = np.abs(a - b)
    maxabs = np.abs(a).max()
    return {
        "max_abs_diff": float(d.max()),
        "max_abs_logit": float(maxabs),
        "rel_to_max": float(d.max() / maxabs),
        "nmse": float(((a - b) ** 2).sum() / (a ** 2).sum()),
        "argmax_agree": float((a.argmax(1) == b.argmax(1)).mean()),
    }


def tolerance_ok(ref: np.ndarray, test: np.ndarray) -> bool:
    """Proposed acceptance for a float32 engine (README): per file, either bound."""
    maxabs = np.abs(ref).max()
    bound = np.abs(ref - test).max() <= 1e-3 * maxabs + 1e-4
    nmse = ((ref - test) ** 2).sum() / (ref ** 2).sum() <= 1e-8
    return bool(bound or nmse)


def make_one(gguf_path: str, write: bool = True) -> dict:
    name = os.path.basename(gguf_path)
    arch_file = os.path.splitext(name)[0]
    ref64 = M.MoEReference(gguf_path, torch.float64)
    ref32 = M.MoEReference(gguf_path, torch.float32)
    ref32q = M.MoEReference(gguf_path, torch.float32, act_round=True)
    seqs = token_sequences(ref64.cfg.n_vocab)
    l64, l32, l32q, margins, route_changes, route_changes_q = [], [], [], [], 0, 0
    router_gap = 0.0
    for toks in seqs:
        r64 = ref64.forward(toks)
        r32 = ref32.forward(toks)
        r32q = ref32q.forward(toks)
        l64.append(r64["logits"])
        l32.append(r32["logits"])
        l32q.append(r32q["logits"])
        for L, info in r64["routing"].items():
            margins.extend(info.margin)
            router_gap = max(router_gap, float(np.abs(info.probs - r32["routing"][L].probs).max()))
            route_changes += sum(sorted(a) != sorted(b) for a, b in
                                 zip(info.experts, r32["routing"][L].experts))
            route_changes_q += sum(sorted(a) != sorted(b) for a, b in
                                   zip(info.experts, r32q["routing"][L].experts))
    unused = sorted(set(ref64.reader.tensors) - set(ref64.W.cache))
    if unused:  # a tensor the reference never read = semantics it may be missing
        ref64.cfg.warnings.append(f"tensors not used by the reference: {unused}")
    st = gap_stats(l64, l32)
    st["actround"] = gap_stats(l64, l32q)
    st["actround"]["route_changes"] = route_changes_q
    st["actround"]["tol_ok"] = tolerance_ok(np.concatenate(l64), np.concatenate(l32q))
    types = {}
    for info in ref64.reader.tensors.values():
        types.setdefault(info.type_name, 0)
        types[info.type_name] += 1
    st["types"] = types
    st.update(model=name, arch=ref64.cfg.arch, n_vocab=ref64.cfg.n_vocab,
              min_route_margin=float(min(margins)) if margins else float("nan"),
              router_prob_gap_f32=router_gap,
              route_changes_f32=route_changes, warnings=ref64.cfg.warnings,
              tol_ok_f32=tolerance_ok(np.concatenate(l64), np.concatenate(l32)))
    if write:
        out = os.path.join(os.path.dirname(gguf_path), arch_file + ".logits")
        write_logits(out, name, sha256(gguf_path), seqs, l64)
        # round-trip check of the text format
        _, back = read_logits(out)
        for (toks, lg), want_toks, want in zip(back, seqs, l64):
            assert toks == want_toks
            assert np.allclose(lg, want, rtol=1e-8, atol=0), out
        st["file"] = out
        st["bytes"] = os.path.getsize(out)
    return st


MUTATIONS = {
    # name: function(cfg) applying a plausible engine bug
    "rope NORM<->NEOX": lambda c: setattr(c, "rope_style", M.ROPE_NEOX if c.rope_style == M.ROPE_NORM else M.ROPE_NORM),
    "top-k renorm flipped": lambda c: setattr(c, "renorm_topk", not c.renorm_topk),
    "shared expert dropped": lambda c: setattr(c, "shared_kind", None),
    "rms eps x10": lambda c: setattr(c, "eps", c.eps * 10),
    "rope base x2": lambda c: setattr(c, "rope_base", c.rope_base * 2),
    "one expert fewer": lambda c: setattr(c, "n_expert_used", c.n_expert_used - 1),
}


def sensitivity(gguf_path: str) -> dict:
    """How far do plausible bugs move the logits, in units of the proposed bound?"""
    ref = M.MoEReference(gguf_path, torch.float64)
    seqs = token_sequences(ref.cfg.n_vocab)
    base = np.concatenate([ref.forward(s)["logits"] for s in seqs])
    bound = 1e-3 * np.abs(base).max() + 1e-4
    out = {}
    for name, mutate in MUTATIONS.items():
        if name == "shared expert dropped" and ref.cfg.shared_kind is None:
            continue
        m = M.MoEReference(gguf_path, torch.float64)
        m.W = ref.W
        mutate(m.cfg)
        got = np.concatenate([m.forward(s)["logits"] for s in seqs])
        out[name] = float(np.abs(got - base).max() / bound)
    return out


def fmt_row(st: dict) -> str:
    q = st["actround"]
    return (f"| {st['model']} | {st['arch']} | {st['n_vocab']} | {st['max_abs_logit']:.4g} | "
            f"{st['max_abs_diff']:.3g} | {st['rel_to_max']:.3g} | {st['nmse']:.3g} | "
            f"{st['min_route_margin']:.3g} | {st['router_prob_gap_f32']:.3g} | {st['route_changes_f32']} | "
            f"{q['max_abs_diff']:.3g} | {q['nmse']:.3g} | {q['route_changes']} | "
            + " ".join(f"{k}:{v}" for k, v in sorted(st['types'].items())) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="arch names or .gguf paths (default: all in tests/data/golden)")
    ap.add_argument("--no-write", action="store_true", help="only measure the float32 gap")
    ap.add_argument("--sensitivity", action="store_true",
                    help="also report how far plausible bugs move the logits (in units of the bound)")
    ap.add_argument("--compare", nargs=2, metavar=("GOLDEN", "TEST"),
                    help="compare two .logits files with the proposed tolerance")
    a = ap.parse_args()

    if a.compare:
        _, g = read_logits(a.compare[0])
        _, t = read_logits(a.compare[1])
        assert [x[0] for x in g] == [x[0] for x in t], "token sequences differ"
        st = gap_stats([x[1] for x in g], [x[1] for x in t])
        ok = tolerance_ok(np.concatenate([x[1] for x in g]), np.concatenate([x[1] for x in t]))
        print(st, "PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)

    paths = []
    for m in a.models or sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.gguf"))):
        paths.append(m if m.endswith(".gguf") else os.path.join(GOLDEN_DIR, m + ".gguf"))
    print("| model | arch | n_vocab | max abs logit (f64) | max abs diff f32 vs f64 | diff / max | nmse | "
          "min top-k routing margin | max router prob diff f32 | routing changes f32 | act-round f32: max abs diff | act-round nmse | "
          "act-round routing changes | tensor types |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        st = make_one(p, write=not a.no_write)
        print(fmt_row(st), flush=True)
        for w in st["warnings"]:
            print(f"  warning ({st['model']}): {w}")
        if not st["actround"]["tol_ok"]:
            print(f"  (diagnostic) an engine rounding activations ggml-style would exceed the bound on {st['model']}")
        if not st["tol_ok_f32"]:
            print(f"  NOTE: float32 reference itself exceeds the proposed tolerance for {st['model']}")
        if a.sensitivity:
            sens = sensitivity(p)
            print("  bug sensitivity (max|diff| / bound): "
                  + ", ".join(f"{k} {v:.3g}" for k, v in sens.items()))
        if "bytes" in st:
            print(f"  wrote {st['file']} ({st['bytes']} bytes)")


if __name__ == "__main__":
    main()
