#!/usr/bin/env python3
"""Property tests of tools/reference/moe_reference.py on tiny GGUF files
written here (F32 weights, random but seeded).

    /usr/bin/python3 tools/reference/test_moe_reference.py

Checks: causality; RoPE against a per-element formula; NORM RoPE with
Q/K rows permuted == NEOX RoPE (the llama HF<->GGUF permutation);
qwen2moe shared expert gate; renormalisation switch; deepseek dense layer;
tied output; GQA equals explicitly duplicated KV heads; F16 storage path.
"""

import math
import os
import struct
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_reference as M  # noqa: E402
from test_gguf_read import build, kv, s  # noqa: E402


def kv_auto(key, v):
    if isinstance(v, bool):
        return kv(key, 7, b"\x01" if v else b"\x00")
    if isinstance(v, int):
        return kv(key, 4, struct.pack("<I", v))
    if isinstance(v, float):
        return kv(key, 6, struct.pack("<f", v))
    if isinstance(v, str):
        return kv(key, 8, s(v))
    raise TypeError(v)


def write_gguf(path, meta, tensors, f16=False):
    """tensors: dict name -> numpy array in numpy (reversed-ne) shape."""
    kvs = [kv_auto(k, v) for k, v in meta.items()]
    ts = []
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        ne = list(reversed(arr.shape))
        if f16 and arr.ndim >= 2:
            ts.append((name, ne, 1, arr.astype("<f2").tobytes()))
        else:
            ts.append((name, ne, 0, arr.astype("<f4").tobytes()))
    with open(path, "wb") as f:
        f.write(build(kvs, ts))


def make_model(arch, seed=0, n_layer=2, n_embd=32, n_head=4, n_head_kv=2, head_dim=8,
               n_expert=4, n_used=2, n_ff=16, n_vocab=50, tied=False, qkv_bias=False,
               n_dense=0, n_shared=0, extra_meta=None, perm_qk=None):
    rng = np.random.default_rng(seed)
    r = lambda *shape: (rng.standard_normal(shape) * 0.3).astype(np.float32)  # noqa: E731
    meta = {
        "general.architecture": arch,
        f"{arch}.block_count": n_layer,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{arch}.rope.freq_base": 10000.0,
        f"{arch}.expert_count": n_expert,
        f"{arch}.expert_used_count": n_used,
    }
    if n_dense:
        meta[f"{arch}.leading_dense_block_count"] = n_dense
    meta.update(extra_meta or {})
    T = {"token_embd.weight": r(n_vocab, n_embd), "output_norm.weight": 1 + r(n_embd)}
    if not tied:
        T["output.weight"] = r(n_vocab, n_embd)
    nq, nkv = n_head * head_dim, n_head_kv * head_dim
    for L in range(n_layer):
        p = f"blk.{L}."
        T[p + "attn_norm.weight"] = 1 + r(n_embd)
        T[p + "attn_q.weight"] = r(nq, n_embd)
        T[p + "attn_k.weight"] = r(nkv, n_embd)
        T[p + "attn_v.weight"] = r(nkv, n_embd)
        if qkv_bias:
            T[p + "attn_q.bias"] = r(nq)
            T[p + "attn_k.bias"] = r(nkv)
            T[p + "attn_v.bias"] = r(nkv)
        T[p + "attn_output.weight"] = r(n_embd, nq)
        if arch == "qwen3moe":
            T[p + "attn_q_norm.weight"] = 1 + r(head_dim)
            T[p + "attn_k_norm.weight"] = 1 + r(head_dim)
        if arch == "olmoe":
            T[p + "attn_q_norm.weight"] = 1 + r(nq)
            T[p + "attn_k_norm.weight"] = 1 + r(nkv)
        T[p + "ffn_norm.weight"] = 1 + r(n_embd)
        if L < n_dense:
            T[p + "ffn_gate.weight"] = r(2 * n_ff, n_embd)
            T[p + "ffn_up.weight"] = r(2 * n_ff, n_embd)
            T[p + "ffn_down.weight"] = r(n_embd, 2 * n_ff)
            continue
        T[p + "ffn_gate_inp.weight"] = r(n_expert, n_embd)
        T[p + "ffn_gate_exps.weight"] = r(n_expert, n_ff, n_embd)
        T[p + "ffn_up_exps.weight"] = r(n_expert, n_ff, n_embd)
        T[p + "ffn_down_exps.weight"] = r(n_expert, n_embd, n_ff)
        if n_shared:
            T[p + "ffn_gate_shexp.weight"] = r(n_shared * n_ff, n_embd)
            T[p + "ffn_up_shexp.weight"] = r(n_shared * n_ff, n_embd)
            T[p + "ffn_down_shexp.weight"] = r(n_embd, n_shared * n_ff)
            if arch == "qwen2moe":
                T[p + "ffn_gate_inp_shexp.weight"] = r(n_embd)
    if perm_qk is not None:
        for L in range(n_layer):
            for nm, nh in (("attn_q", n_head), ("attn_k", n_head_kv)):
                w = T[f"blk.{L}.{nm}.weight"]
                T[f"blk.{L}.{nm}.weight"] = perm_qk(w, nh, head_dim)
    return meta, T


def hf_to_gguf_permute(w, n_h, d):
    """llama.cpp convert: rows of each head [0..d/2-1 | d/2..d-1] (rotate_half pairs)
    are interleaved so adjacent rows form a pair: (x[i], x[i+d/2]) -> rows 2i, 2i+1."""
    return w.reshape(n_h, 2, d // 2, -1).swapaxes(1, 2).reshape(w.shape)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def model(self, name, meta, T, f16=False, dtype=torch.float64):
        path = os.path.join(self.tmp.name, name + ".gguf")
        write_gguf(path, meta, T, f16=f16)
        return M.MoEReference(path, dtype)


class TestBlocks(unittest.TestCase):
    def test_rope_formula(self):
        rng = np.random.default_rng(1)
        x = torch.from_numpy(rng.standard_normal((3, 2, 8)))
        pos = torch.arange(3)
        for style in (M.ROPE_NORM, M.ROPE_NEOX):
            y = M.rope(x, pos, 6, 500.0, style)   # n_rot < head_dim: last 2 dims untouched
            for t in range(3):
                for h in range(2):
                    for i in range(3):
                        th = t * 500.0 ** (-2 * i / 6)
                        a, b = (2 * i, 2 * i + 1) if style == M.ROPE_NORM else (i, i + 3)
                        xa, xb = x[t, h, a].item(), x[t, h, b].item()
                        self.assertAlmostEqual(y[t, h, a].item(), xa * math.cos(th) - xb * math.sin(th), 12)
                        self.assertAlmostEqual(y[t, h, b].item(), xa * math.sin(th) + xb * math.cos(th), 12)
                    np.testing.assert_array_equal(y[t, h, 6:].numpy(), x[t, h, 6:].numpy())

    def test_topk_ties(self):
        p = torch.tensor([0.1, 0.3, 0.3, 0.2, 0.3], dtype=torch.float64)
        self.assertEqual(M.topk_lowest_index_ties(p, 2), [1, 2])
        self.assertEqual(M.topk_lowest_index_ties(p, 4), [1, 2, 4, 3])


class TestModels(Base):
    toks = [3, 17, 5, 42, 0, 9, 9]

    def test_causal_all_archs(self):
        for arch in M.ARCH_TABLE:
            kw = dict(n_shared=1) if arch in ("qwen2moe", "deepseek") else {}
            if arch == "deepseek":
                kw["n_dense"] = 1
            ref = self.model(arch, *make_model(arch, **kw))
            full = ref.forward(self.toks)["logits"]
            pref = ref.forward(self.toks[:4])["logits"]
            np.testing.assert_allclose(full[:4], pref, rtol=0, atol=1e-12, err_msg=arch)
            self.assertTrue(np.all(np.isfinite(full)))

    def test_norm_rope_with_permuted_rows_equals_neox(self):
        # Same weights: a NEOX-rope file (qwen2moe, HF rotate_half semantics) and a
        # NORM-rope file (llama) whose Q/K rows went through llama.cpp's HF->GGUF
        # permutation must agree. One expert, used once: routing weight 1 in both
        # (renormalised or not), no shared expert.
        kw = dict(n_expert=1, n_used=1)
        neox = self.model("q2", *make_model("qwen2moe", seed=5, **kw))
        norm = self.model("ll", *make_model("llama", seed=5, perm_qk=hf_to_gguf_permute, **kw))
        a = neox.forward(self.toks)["logits"]
        b = norm.forward(self.toks)["logits"]
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
        # and without the permutation they differ
        norm2 = self.model("ll2", *make_model("llama", seed=5, **kw))
        self.assertGreater(np.abs(norm2.forward(self.toks)["logits"] - a).max(), 1e-3)

    def test_gqa_equals_duplicated_kv(self):
        meta, T = make_model("llama", seed=7, n_head=4, n_head_kv=2)
        meta2, T2 = make_model("llama", seed=7, n_head=4, n_head_kv=2)
        meta2["llama.attention.head_count_kv"] = 4
        for L in range(2):
            for nm in ("attn_k", "attn_v"):
                w = T[f"blk.{L}.{nm}.weight"].reshape(2, 8, 32)
                T2[f"blk.{L}.{nm}.weight"] = np.repeat(w, 2, axis=0).reshape(32, 32)
        a = self.model("gqa", meta, T).forward(self.toks)["logits"]
        b = self.model("mha", meta2, T2).forward(self.toks)["logits"]
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)

    def test_renorm_vs_not(self):
        # same MoE layer with renormalisation on/off: outputs differ by the factor sum(w)
        meta, T = make_model("llama", seed=3)
        ref = self.model("l", meta, T)
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((5, 32)))
        out_r, info = M.moe_ffn(ref.cfg, ref.W, 0, x)
        ref.cfg.renorm_topk = False
        out_n, info_n = M.moe_ffn(ref.cfg, ref.W, 0, x)
        for t in range(5):
            self.assertAlmostEqual(sum(info.weights[t]), 1.0, 12)
            self.assertLess(sum(info_n.weights[t]), 1.0)
            s_ = sum(info_n.weights[t])
            np.testing.assert_allclose(out_n[t].numpy(), out_r[t].numpy() * s_, rtol=1e-12, atol=1e-14)

    def test_qwen2moe_shared_gate(self):
        meta, T = make_model("qwen2moe", seed=4, n_shared=1)
        ref = self.model("q", meta, T)
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 32)))
        with_shared, _ = M.moe_ffn(ref.cfg, ref.W, 0, x)
        ref.cfg.shared_kind = None
        routed, _ = M.moe_ffn(ref.cfg, ref.W, 0, x)
        W = ref.W
        g = 1 / (1 + np.exp(-(x.numpy() @ T["blk.0.ffn_gate_inp_shexp.weight"].astype(np.float64))))
        shared = M.swiglu_ffn(x, W["blk.0.ffn_gate_shexp.weight"], W["blk.0.ffn_up_shexp.weight"],
                              W["blk.0.ffn_down_shexp.weight"]).numpy()
        np.testing.assert_allclose(with_shared.numpy(), routed.numpy() + g[:, None] * shared, atol=1e-12)

    def test_deepseek_dense_and_scale(self):
        meta, T = make_model("deepseek", seed=6, n_dense=1, n_shared=2,
                             extra_meta={"deepseek.expert_weights_scale": 2.0})
        ref = self.model("d", meta, T)
        self.assertEqual(ref.cfg.expert_weights_scale, 2.0)
        res = ref.forward(self.toks)
        self.assertEqual(sorted(res["routing"].keys()), [1])   # layer 0 dense
        for w, e in zip(res["routing"][1].weights, res["routing"][1].experts):
            self.assertEqual(len(e), 2)
            self.assertLess(sum(w), 2.0)

    def test_tied_output(self):
        meta, T = make_model("olmoe", seed=8, tied=True)
        ref = self.model("o", meta, T)
        res = ref.forward(self.toks, dump_hidden=True)
        self.assertEqual(len(res["hidden"]), 3)
        h = torch.from_numpy(res["hidden"][-1])
        expect = M.rms_norm(h, ref.W["output_norm.weight"], 1e-6) @ ref.W["token_embd.weight"].T
        np.testing.assert_allclose(res["logits"], expect.numpy(), atol=1e-12)

    def test_float32_close_to_float64_and_f16_storage(self):
        meta, T = make_model("qwen3moe", seed=9, qkv_bias=True)
        a = self.model("q3", meta, T, f16=True).forward(self.toks)["logits"]
        b = self.model("q3b", meta, T, f16=True, dtype=torch.float32).forward(self.toks)["logits"]
        self.assertLess(np.abs(a - b).max(), 1e-4 * np.abs(a).max() + 1e-5)
        c = self.model("q3c", meta, T, f16=False).forward(self.toks)["logits"]
        self.assertGreater(np.abs(a - c).max(), 0)   # f16 rounding changed the weights


if __name__ == "__main__":
    unittest.main(verbosity=1)
