#!/usr/bin/env python3
"""Write golden logits for the synthetic test models, and measure how close a
float32 engine can be expected to come to them.

    /usr/bin/python3 tools/reference/make_goldens.py            # all tests/data/golden/*.gguf
    /usr/bin/python3 tools/reference/make_goldens.py llama qwen3moe
    /usr/bin/python3 tools/reference/make_goldens.py --sensitivity     # + plausible bugs vs the bound
    /usr/bin/python3 tools/reference/make_goldens.py --no-write --engine build/app/moechat-cli
    /usr/bin/python3 tools/reference/make_goldens.py --compare tests/data/golden/llama.logits other.logits

For every tests/data/golden/<arch>.gguf this runs tools/reference/moe_reference.py
in float64 with --activations (default q8: the inputs of matmuls with Q8_0/Q4_0/K-quant
weights quantised to Q8_0/Q8_K blocks, as moechat's CPU engine computes) and writes
tests/data/golden/<arch>.logits:

    # reference: tools/reference/moe_reference.py float64, activations q8, model <arch>.gguf sha256 <hex>
    seq <n> <id1> ... <idn>
    pos 0 <n_vocab logits, %.9g, space separated>
    ...
    pos <n-1> ...
    seq ...

Token sequences (fixed rule, depends only on n_vocab):
    SEQ_LENGTHS = (1, 7, 16); sequence s (0-based), position j:
        id = (1 + 97*s + 37*j + 5*j*j) mod n_vocab

It also measures, per model: the same reference in float32 against the float64
goldens; the smallest top-k routing margin; the quantised activations closest to a
rounding tie (x/d within a few float32 ulps of k + 1/2, or d = amax/127 near the
midpoint of two halves; distances in float32 ulps of x/d resp. d) and what flipping
the nearest ones does to the logits;
and how far the goldens are from float activations. The bound is the one
tests/test_golden.cpp applies, per position:
    max |engine - golden| <= REL_TOL * max |golden| + ABS_TOL
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import moe_reference as M  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
GOLDEN_DIR = os.path.join(REPO, "tests", "data", "golden")
SEQ_LENGTHS = (1, 7, 16)
REL_TOL = 1e-4   # tests/test_golden.cpp kRelTolerance
ABS_TOL = 1e-4   # tests/test_golden.cpp kAbsTolerance


def token_sequences(n_vocab: int) -> List[List[int]]:
    return [[(1 + 97 * s + 37 * j + 5 * j * j) % n_vocab for j in range(n)]
            for s, n in enumerate(SEQ_LENGTHS)]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def header_line(model_file: str, digest: str, activations: str) -> str:
    return (f"# reference: tools/reference/moe_reference.py float64, activations {activations}, "
            f"model {model_file} sha256 {digest}")


def parse_header(header: str) -> Dict[str, str]:
    """{'model', 'sha256', 'activations'} from a golden file's first line. Files from
    before the activations field carry float activations."""
    m = re.search(r"model (\S+) sha256 ([0-9a-f]{64})$", header)
    if not header.startswith("# reference:") or not m:
        raise ValueError(f"not a golden header: {header[:100]!r}")
    a = re.search(r"activations (\w+)", header)
    return {"model": m.group(1), "sha256": m.group(2), "activations": a.group(1) if a else "float"}


def check_pair(logits_path: str, gguf_path: str) -> Dict[str, str]:
    """The header of a .logits file names this .gguf and its sha256; raises otherwise."""
    with open(logits_path) as f:
        info = parse_header(f.readline().rstrip("\n"))
    if info["model"] != os.path.basename(gguf_path):
        raise ValueError(f"{logits_path} belongs to {info['model']}, not {gguf_path}")
    if info["sha256"] != sha256(gguf_path):
        raise ValueError(f"{logits_path} is stale: {gguf_path} changed since (sha256 differs)")
    return info


def write_logits(path: str, header: str, seqs, logits) -> None:
    with open(path, "w") as f:
        f.write(header + "\n")
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


def worst_rel(ref: np.ndarray, test: np.ndarray) -> float:
    """max over positions (rows) of max|diff| / max|ref|, as tests/test_golden.cpp reports."""
    return float((np.abs(ref - test).max(axis=1) / np.abs(ref).max(axis=1)).max())


def within_bound(ref: np.ndarray, test: np.ndarray) -> bool:
    """tests/test_golden.cpp's acceptance, per position."""
    return bool(np.all(np.abs(ref - test).max(axis=1) <= REL_TOL * np.abs(ref).max(axis=1) + ABS_TOL))


def in_bound_units(ref: np.ndarray, test: np.ndarray) -> float:
    """Largest per-position max|diff| / bound (> 1 means the test fails)."""
    return float((np.abs(ref - test).max(axis=1) / (REL_TOL * np.abs(ref).max(axis=1) + ABS_TOL)).max())


# ---- rounding ties of the quantised activations ----------------------------------

class TieWatch:
    """Registers activations mode `name`: the quantisation of mode "q8" that also
    records, for every quantised row, how close its roundings came to a tie, and can
    flip one chosen rounding (for every call whose input row is bit-identical, as
    the q/k/v projections of one input are)."""

    def __init__(self, name: str = "q8-watch"):
        self.name = name
        self.records: List[tuple] = []   # (ulps, kind, input key, index)
        self.flip: Optional[tuple] = None
        M.ACTIVATION_MODES[name] = {t: self._rounder(f) for t, f in M.ACTIVATION_MODES["q8"].items()}

    def _rounder(self, f):
        k8 = f is M.round_q8_k

        def apply(x: torch.Tensor) -> torch.Tensor:
            a = np.ascontiguousarray(x.detach().to(torch.float32).numpy())
            key = (k8, a.shape, hashlib.sha1(a.tobytes()).hexdigest())
            d, t = (M.q8_k_scaled if k8 else M.q8_0_scaled)(a)
            q = np.rint(t)
            if k8:
                q = np.minimum(np.float32(127), q)
            q = q.astype(np.int8)
            dd = d.copy() if k8 else d.astype(np.float16)
            self._record(key, d, t, k8)
            if self.flip is not None and self.flip[2] == key:
                _, kind, _, idx = self.flip
                if kind == "element":      # the other integer next to the tie
                    q[idx] = np.clip(2 * int(np.floor(t[idx])) + 1 - int(q[idx]), -127, 127)
                else:                      # the other half next to d
                    dd[idx] = np.nextafter(dd[idx], np.float16(np.inf) if d[idx] > dd[idx] else np.float16(0))
            deq = M.dequantize_q8_k if k8 else M.dequantize_q8_0
            return torch.from_numpy(deq(dd, q.reshape(a.shape))).to(x.dtype)
        return apply

    def _record(self, key, d, t, k8: bool) -> None:
        # element ties: |t - (floor(t) + 1/2)| in float32 ulps of t (|t| >= 1/2 only)
        valid = np.broadcast_to((d != 0)[..., None], t.shape) & (np.abs(t) >= 0.5)
        if valid.any():
            ulps = np.abs(t.astype(np.float64) - (np.floor(t) + 0.5)) / np.spacing(np.abs(t)).astype(np.float64)
            ulps = np.where(valid, ulps, np.inf)
            i = np.unravel_index(np.argmin(ulps), ulps.shape)
            self.records.append((float(ulps[i]), "element", key, i))
        if not k8:
            # scale ties: distance of d to the midpoint between its two nearest halves, in float32 ulps of d
            h = d.astype(np.float16)
            other = np.where(h.astype(np.float32) < d, np.nextafter(h, np.float16(np.inf)),
                             np.nextafter(h, np.float16(0)))
            mid = (h.astype(np.float64) + other.astype(np.float64)) / 2
            ulps = np.abs(d.astype(np.float64) - mid) / np.spacing(d).astype(np.float64)
            ulps = np.where(d != 0, ulps, np.inf)
            j = np.unravel_index(np.argmin(ulps), ulps.shape)
            if np.isfinite(ulps[j]):
                self.records.append((float(ulps[j]), "scale", key, j))


def tie_report(gguf_path: str, seqs, goldens, n_flip: int = 2) -> Optional[dict]:
    """Nearest rounding ties of the q8 goldens' quantised activations, and what flipping
    the n_flip nearest of each kind (per sequence) does: max over positions of
    max|diff|/max|logit|. None when the model has no quantised matmul."""
    watch = TieWatch()
    ref = M.MoEReference(gguf_path, torch.float64, watch.name)
    out = {"element": [np.inf, 0, 0.0], "scale": [np.inf, 0, 0.0]}   # [min ulps, count <= 4 ulps, worst flip]
    any_q = False
    for toks, golden in zip(seqs, goldens):
        watch.records.clear()
        watch.flip = None
        base = ref.forward(toks)["logits"]
        assert np.array_equal(base, golden), "watched quantisation differs from mode q8"
        recs = {}
        for r in watch.records:          # one record per distinct input row and kind
            recs.setdefault((r[1], r[2]), r)
        any_q = any_q or bool(recs)
        for kind in out:
            mine = sorted((r for r in recs.values() if r[1] == kind), key=lambda r: r[0])
            if not mine:
                continue
            out[kind][0] = min(out[kind][0], mine[0][0])
            out[kind][1] += sum(r[0] <= 4 for r in mine)
            for r in mine[:n_flip]:
                watch.flip = r
                out[kind][2] = max(out[kind][2], worst_rel(base, ref.forward(toks)["logits"]))
            watch.flip = None
    del M.ACTIVATION_MODES[watch.name]
    return out if any_q else None


# ---- one model ----------------------------------------------------------------

def make_one(gguf_path: str, activations: str = "q8", write: bool = True) -> dict:
    name = os.path.basename(gguf_path)
    ref64 = M.MoEReference(gguf_path, torch.float64, activations)
    ref32 = M.MoEReference(gguf_path, torch.float32, activations)
    other = "float" if activations != "float" else "q8"
    ref64o = M.MoEReference(gguf_path, torch.float64, other)
    ref64o.W.cache = ref64.W.cache
    seqs = token_sequences(ref64.cfg.n_vocab)
    l64, l32, l64o, margins = [], [], [], []
    route_changes = route_changes_o = 0
    router_gap = 0.0
    for toks in seqs:
        r64, r32, r64o = ref64.forward(toks), ref32.forward(toks), ref64o.forward(toks)
        l64.append(r64["logits"])
        l32.append(r32["logits"])
        l64o.append(r64o["logits"])
        for L, info in r64["routing"].items():
            margins.extend(info.margin)
            router_gap = max(router_gap, float(np.abs(info.probs - r32["routing"][L].probs).max()))
            route_changes += sum(sorted(a) != sorted(b) for a, b in zip(info.experts, r32["routing"][L].experts))
            route_changes_o += sum(sorted(a) != sorted(b) for a, b in zip(info.experts, r64o["routing"][L].experts))
    unused = sorted(set(ref64.reader.tensors) - set(ref64.W.cache))
    if unused:  # a tensor the reference never read = semantics it may be missing
        ref64.cfg.warnings.append(f"tensors not used by the reference: {unused}")
    a64, a32, a64o = np.concatenate(l64), np.concatenate(l32), np.concatenate(l64o)
    types: Dict[str, int] = {}
    for info in ref64.reader.tensors.values():
        types[info.type_name] = types.get(info.type_name, 0) + 1
    st = dict(model=name, arch=ref64.cfg.arch, n_vocab=ref64.cfg.n_vocab, types=types,
              max_abs_logit=float(np.abs(a64).max()),
              rel_f32=worst_rel(a64, a32), ok_f32=within_bound(a64, a32), route_changes_f32=route_changes,
              min_route_margin=float(min(margins)) if margins else float("nan"), router_gap_f32=router_gap,
              other=other, rel_other=worst_rel(a64, a64o), route_changes_other=route_changes_o,
              ties=tie_report(gguf_path, seqs, l64) if activations == "q8" else None,
              warnings=ref64.cfg.warnings)
    if write:
        out = os.path.join(os.path.dirname(gguf_path), os.path.splitext(name)[0] + ".logits")
        write_logits(out, header_line(name, sha256(gguf_path), activations), seqs, l64)
        header, back = read_logits(out)          # round trip of the text format and the header
        assert parse_header(header)["activations"] == activations
        check_pair(out, gguf_path)
        for (toks, lg), want_toks, want in zip(back, seqs, l64):
            assert toks == want_toks
            assert np.allclose(lg, want, rtol=1e-8, atol=0), out
        st["file"], st["bytes"] = out, os.path.getsize(out)
    return st


MUTATIONS = {
    # name: function(reference) applying a plausible engine bug
    "rope NORM<->NEOX": lambda m: setattr(m.cfg, "rope_style",
                                          M.ROPE_NEOX if m.cfg.rope_style == M.ROPE_NORM else M.ROPE_NORM),
    "top-k renorm flipped": lambda m: setattr(m.cfg, "renorm_topk", not m.cfg.renorm_topk),
    "shared expert dropped": lambda m: setattr(m.cfg, "shared_kind", None),
    "rope base x2": lambda m: setattr(m.cfg, "rope_base", m.cfg.rope_base * 2),
    "one expert fewer": lambda m: setattr(m.cfg, "n_expert_used", m.cfg.n_expert_used - 1),
    "rms eps x10": lambda m: setattr(m.cfg, "eps", m.cfg.eps * 10),
    "float activations": lambda m: setattr(m.W, "activations", "float"),
}


def sensitivity(gguf_path: str, activations: str = "q8") -> Dict[str, float]:
    """How far do plausible bugs move the logits, in units of the bound (> 1: caught)?"""
    ref = M.MoEReference(gguf_path, torch.float64, activations)
    seqs = token_sequences(ref.cfg.n_vocab)
    base = np.concatenate([ref.forward(s)["logits"] for s in seqs])
    quantised = any(M.ACTIVATION_MODES[activations].get(t.type) for t in ref.reader.tensors.values())
    out = {}
    for name, mutate in MUTATIONS.items():
        if name == "shared expert dropped" and ref.cfg.shared_kind is None:
            continue
        if name == "float activations" and (activations == "float" or not quantised):
            continue
        m = M.MoEReference(gguf_path, torch.float64, activations)
        m.W.cache = ref.W.cache
        mutate(m)
        got = np.concatenate([m.forward(s)["logits"] for s in seqs])
        out[name] = in_bound_units(base, got)
    return out


def engine_logits(cli: str, gguf_path: str, tokens: List[int], threads: int) -> np.ndarray:
    """`moechat-cli logits`: one line of n_vocab logits per position."""
    res = subprocess.run([cli, "logits", gguf_path, "--tokens", ",".join(map(str, tokens)),
                          "--threads", str(threads)], capture_output=True, text=True, check=True)
    return np.array([[float(v) for v in line.split()] for line in res.stdout.strip().split("\n")])


def engine_check(cli: str, gguf_path: str, threads: int) -> dict:
    """The engine against the .logits file next to the model, and against the
    reference with the other activations mode."""
    logits_path = os.path.splitext(gguf_path)[0] + ".logits"
    info = check_pair(logits_path, gguf_path)
    _, golden = read_logits(logits_path)
    other = "float" if info["activations"] != "float" else "q8"
    ref = M.MoEReference(gguf_path, torch.float64, other)
    g, e, o = [], [], []
    for toks, lg in golden:
        g.append(lg)
        e.append(engine_logits(cli, gguf_path, toks, threads))
        o.append(ref.forward(toks)["logits"])
    g, e, o = np.concatenate(g), np.concatenate(e), np.concatenate(o)
    return {"activations": info["activations"], "rel": worst_rel(g, e), "units": in_bound_units(g, e),
            "ok": within_bound(g, e), "other": other, "rel_other": worst_rel(o, e)}


def fmt_row(st: dict) -> str:
    t = st["ties"]
    tie = "-" if t is None else (f"{t['element'][0]:.3g} / {t['element'][1]} / {t['element'][2]:.2g} | "
                                 f"{t['scale'][0]:.3g} / {t['scale'][1]} / {t['scale'][2]:.2g}")
    if t is None:
        tie += " | -"
    return (f"| {st['arch']} | " + ", ".join(f"{k} {v}" for k, v in sorted(st["types"].items())) +
            f" | {st['max_abs_logit']:.4g} | {st['rel_f32']:.3g} | {st['route_changes_f32']} | "
            f"{st['min_route_margin']:.3g} | {st['router_gap_f32']:.2g} | {tie} | {st['rel_other']:.3g} ({st['route_changes_other']}) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="arch names or .gguf paths (default: all in tests/data/golden)")
    ap.add_argument("--activations", choices=["q8", "float"], default="q8",
                    help="activation rounding of the goldens (default q8, as the CPU engine)")
    ap.add_argument("--no-write", action="store_true", help="only measure")
    ap.add_argument("--sensitivity", action="store_true",
                    help="also report how far plausible bugs move the logits (in units of the bound)")
    ap.add_argument("--engine", metavar="CLI", help="also compare `CLI logits` with the existing .logits files")
    ap.add_argument("--threads", type=int, default=1, help="--threads for the engine CLI")
    ap.add_argument("--compare", nargs=2, metavar=("GOLDEN", "TEST"),
                    help="compare two .logits files with the bound of tests/test_golden.cpp")
    a = ap.parse_args()

    if a.compare:
        _, g = read_logits(a.compare[0])
        _, t = read_logits(a.compare[1])
        assert [x[0] for x in g] == [x[0] for x in t], "token sequences differ"
        ga, ta = np.concatenate([x[1] for x in g]), np.concatenate([x[1] for x in t])
        ok = within_bound(ga, ta)
        print(f"worst max|diff|/max|logit| {worst_rel(ga, ta):.3g}, {in_bound_units(ga, ta):.3g} x bound:",
              "PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)

    paths = [m if m.endswith(".gguf") else os.path.join(GOLDEN_DIR, m + ".gguf")
             for m in a.models or sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.gguf")))]
    if a.engine:   # before writing: compares the files as they are
        print("| arch | engine vs .logits: worst max|diff|/max|logit| | x bound | vs reference, other activations |")
        print("|---|---|---|---|")
        for p in paths:
            r = engine_check(a.engine, p, a.threads)
            print(f"| {os.path.basename(p)[:-5]} | {r['rel']:.3g} ({r['activations']}) | {r['units']:.3g}"
                  f"{'' if r['ok'] else ' FAIL'} | {r['rel_other']:.3g} ({r['other']}) |", flush=True)
        if a.no_write and not a.sensitivity:
            return
    print(f"goldens: float64, activations {a.activations}; bound per position {REL_TOL:g} * max|logit| + {ABS_TOL:g}")
    print("| arch | tensor types | max abs logit | f32 ref vs goldens (worst rel) | routing changes f32 | "
          "min top-k margin | max router prob diff f32 | nearest element tie: ulps / # <= 4 ulps / flip effect | "
          "nearest f16 scale tie: ulps / # <= 4 ulps / flip effect | goldens vs other activations (routing changes) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        st = make_one(p, a.activations, write=not a.no_write)
        print(fmt_row(st), flush=True)
        for w in st["warnings"]:
            print(f"  warning ({st['model']}): {w}")
        if not st["ok_f32"]:
            print(f"  NOTE: the float32 reference itself exceeds the bound on {st['model']}")
        if a.sensitivity:
            sens = sensitivity(p, a.activations)
            print("  bug sensitivity (max|diff| / bound): " + ", ".join(f"{k} {v:.3g}" for k, v in sens.items()))
        if "bytes" in st:
            print(f"  wrote {st['file']} ({st['bytes']} bytes)")


if __name__ == "__main__":
    main()
