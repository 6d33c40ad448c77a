#!/usr/bin/env python3
"""Property tests of tools/reference/moe_reference.py on tiny GGUF files
written here (F32 weights, random but seeded).

    /usr/bin/python3 tools/reference/test_moe_reference.py

Checks: causality; RoPE against a per-element formula; NORM RoPE with
Q/K rows permuted == NEOX RoPE (the llama HF<->GGUF permutation);
qwen2moe shared expert gate; renormalisation switch; deepseek dense layer;
tied output; GQA equals explicitly duplicated KV heads; F16 storage path;
deepseek2 (MLA): the MLA and legacy tensor layouts agree, the plain attention
equals the absorbed one engines run, YaRN magnitude and kq_scale with and without
yarn_log_multiplier, causality, group-limited sigmoid routing with a selection bias,
float inputs of the latent up-projections in "q8" mode;
the Q8_0/Q8_K activation quantisers (scales, rounding ties, zero blocks, the
-127 element) and which matmuls the "q8" activations mode quantises.
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


def q8_0_bytes(arr):
    """Q8_0 encoding of a float array (last dim a multiple of 32): per block of 32,
    f16 scale amax/127 then 32 int8 round(x/scale)."""
    out = bytearray()
    for blk in np.asarray(arr, dtype=np.float64).reshape(-1, 32):
        d = float(np.abs(blk).max()) / 127
        d16 = struct.unpack("<e", struct.pack("<e", d))[0]
        q = np.zeros(32) if d16 == 0 else np.clip(np.round(blk / d16), -127, 127)
        out += struct.pack("<e", d16) + q.astype(np.int8).tobytes()
    return bytes(out)


def write_gguf(path, meta, tensors, f16=False, q8_0=False):
    """tensors: dict name -> numpy array in numpy (reversed-ne) shape. Matrices are
    stored F32, F16 (f16=True) or Q8_0 (q8_0=True)."""
    kvs = [kv_auto(k, v) for k, v in meta.items()]
    ts = []
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        ne = list(reversed(arr.shape))
        if q8_0 and arr.ndim >= 2:
            ts.append((name, ne, 8, q8_0_bytes(arr)))
        elif f16 and arr.ndim >= 2:
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


def make_deepseek2(seed=0, layout="mla", n_layer=2, n_embd=32, n_head=4, qk_nope=8, n_rot=4, v_dim=6,
                   kv_lora=16, q_lora=0, n_expert=8, n_used=2, n_ff=16, n_vocab=50, n_dense=1, n_shared=1,
                   gating=None, probs_bias=False, extra_meta=None):
    """A tiny deepseek2 model. layout "mla": attn_k_b/attn_v_b and the *_mla head-size
    keys (llama.cpp's converter since 2025); "legacy": attn_kv_b (HF kv_b_proj).
    The same seed gives the same W_UK/W_UV in both layouts. q_lora > 0: attn_q_a/_b."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: (rng.standard_normal(shape) * 0.3).astype(np.float32)  # noqa: E731
    a = "deepseek2"
    meta = {
        "general.architecture": a,
        f"{a}.block_count": n_layer,
        f"{a}.context_length": 256,
        f"{a}.embedding_length": n_embd,
        f"{a}.feed_forward_length": 2 * n_ff,
        f"{a}.attention.head_count": n_head,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{a}.rope.freq_base": 10000.0,
        f"{a}.rope.dimension_count": n_rot,
        f"{a}.expert_count": n_expert,
        f"{a}.expert_used_count": n_used,
        f"{a}.expert_feed_forward_length": n_ff,
        f"{a}.expert_shared_count": n_shared,
        f"{a}.leading_dense_block_count": n_dense,
        f"{a}.attention.kv_lora_rank": kv_lora,
    }
    if q_lora:
        meta[f"{a}.attention.q_lora_rank"] = q_lora
    if layout == "mla":
        meta.update({f"{a}.attention.key_length_mla": qk_nope + n_rot, f"{a}.attention.value_length_mla": v_dim,
                     f"{a}.attention.key_length": kv_lora + n_rot, f"{a}.attention.value_length": kv_lora,
                     f"{a}.attention.head_count_kv": 1})
    else:
        meta.update({f"{a}.attention.key_length": qk_nope + n_rot, f"{a}.attention.value_length": v_dim,
                     f"{a}.attention.head_count_kv": n_head})
    if gating is not None:
        meta[f"{a}.expert_gating_func"] = gating
    meta.update(extra_meta or {})
    T = {"token_embd.weight": r(n_vocab, n_embd), "output_norm.weight": 1 + r(n_embd),
         "output.weight": r(n_vocab, n_embd)}
    for L in range(n_layer):
        p = f"blk.{L}."
        T[p + "attn_norm.weight"] = 1 + r(n_embd)
        if q_lora:
            T[p + "attn_q_a.weight"] = r(q_lora, n_embd)
            T[p + "attn_q_a_norm.weight"] = 1 + r(q_lora)
            T[p + "attn_q_b.weight"] = r(n_head * (qk_nope + n_rot), q_lora)
        else:
            T[p + "attn_q.weight"] = r(n_head * (qk_nope + n_rot), n_embd)
        T[p + "attn_kv_a_mqa.weight"] = r(kv_lora + n_rot, n_embd)
        T[p + "attn_kv_a_norm.weight"] = 1 + r(kv_lora)
        kv_b = r(n_head * (qk_nope + v_dim), kv_lora)            # HF kv_b_proj: per head [k_nope rows | v rows]
        if layout == "mla":
            per_head = kv_b.reshape(n_head, qk_nope + v_dim, kv_lora)
            T[p + "attn_k_b.weight"] = np.ascontiguousarray(per_head[:, :qk_nope].transpose(0, 2, 1))
            T[p + "attn_v_b.weight"] = np.ascontiguousarray(per_head[:, qk_nope:])
        else:
            T[p + "attn_kv_b.weight"] = kv_b
        T[p + "attn_output.weight"] = r(n_embd, n_head * v_dim)
        T[p + "ffn_norm.weight"] = 1 + r(n_embd)
        if L < n_dense:
            T[p + "ffn_gate.weight"] = r(2 * n_ff, n_embd)
            T[p + "ffn_up.weight"] = r(2 * n_ff, n_embd)
            T[p + "ffn_down.weight"] = r(n_embd, 2 * n_ff)
            continue
        T[p + "ffn_gate_inp.weight"] = r(n_expert, n_embd)
        if probs_bias:
            T[p + "exp_probs_b.bias"] = r(n_expert)
        T[p + "ffn_gate_exps.weight"] = r(n_expert, n_ff, n_embd)
        T[p + "ffn_up_exps.weight"] = r(n_expert, n_ff, n_embd)
        T[p + "ffn_down_exps.weight"] = r(n_expert, n_embd, n_ff)
        if n_shared:
            T[p + "ffn_gate_shexp.weight"] = r(n_shared * n_ff, n_embd)
            T[p + "ffn_up_shexp.weight"] = r(n_shared * n_ff, n_embd)
            T[p + "ffn_down_shexp.weight"] = r(n_embd, n_shared * n_ff)
    return meta, T


def absorbed_mla_attention(cfg, W, L, x, positions, mscale, kq_scale):
    """MLA the way engines run it, from the MLA-layout tensors: the query absorbs
    attn_k_b (q_abs_h = attn_k_b[h] q_nope_h, kv_lora long) and scores against the
    latent c itself, the softmax averages c, then attn_v_b[h] maps it to the head's
    value.  mscale / kq_scale given by the caller (the spec's formulas)."""
    p = f"blk.{L}."
    T, H, r, n_rot = x.shape[0], cfg.n_head, cfg.kv_lora_rank, cfg.n_rot
    nope = cfg.head_dim - n_rot
    if W.has(p + "attn_q_a.weight"):
        cq = M.rms_norm(x @ W[p + "attn_q_a.weight"].T, W[p + "attn_q_a_norm.weight"], cfg.eps)
        q = cq @ W[p + "attn_q_b.weight"].T
    else:
        q = x @ W[p + "attn_q.weight"].T
    q = q.reshape(T, H, cfg.head_dim)
    kv = x @ W[p + "attn_kv_a_mqa.weight"].T
    c = M.rms_norm(kv[:, :r], W[p + "attn_kv_a_norm.weight"], cfg.eps)             # (S, r)
    yarn = (cfg.yarn_factor, cfg.yarn_orig_ctx) if cfg.yarn_factor > 1 else None
    q_pe = M.rope(q[..., nope:], positions, n_rot, cfg.rope_base, M.ROPE_NORM, yarn, mscale)
    k_pe = M.rope(kv[:, None, r:], positions, n_rot, cfg.rope_base, M.ROPE_NORM, yarn, mscale)[:, 0]
    q_abs = torch.einsum("hrd,thd->thr", W[p + "attn_k_b.weight"], q[..., :nope])  # (T, H, r)
    scores = (torch.einsum("thr,sr->hts", q_abs, c) + torch.einsum("thd,sd->hts", q_pe, k_pe)) * kq_scale
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    o_latent = torch.einsum("hts,sr->thr", torch.softmax(scores, dim=-1), c)        # (T, H, r)
    o = torch.einsum("hvr,thr->thv", W[p + "attn_v_b.weight"], o_latent)            # (T, H, v)
    return o.reshape(T, -1) @ W[p + "attn_output.weight"].T


def hf_to_gguf_permute(w, n_h, d):
    """llama.cpp convert: rows of each head [0..d/2-1 | d/2..d-1] (rotate_half pairs)
    are interleaved so adjacent rows form a pair: (x[i], x[i+d/2]) -> rows 2i, 2i+1."""
    return w.reshape(n_h, 2, d // 2, -1).swapaxes(1, 2).reshape(w.shape)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def model(self, name, meta, T, f16=False, dtype=torch.float64, q8_0=False, activations="float"):
        path = os.path.join(self.tmp.name, name + ".gguf")
        write_gguf(path, meta, T, f16=f16, q8_0=q8_0)
        return M.MoEReference(path, dtype, activations)


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
        # make_model writes the tensors of the first five families; glm4moe and gpt-oss
        # (their own norm names, biases, sinks) are covered by the goldens against the engine.
        for arch in ("llama", "qwen2moe", "qwen3moe", "olmoe", "deepseek"):
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


class TestDeepseek2(Base):
    toks = [3, 17, 5, 42, 0, 9, 9]
    # YaRN variants: none; yarn_log_multiplier present (DeepSeek-V2: 0.1 * mscale_all_dim 0.707); absent
    yarn_meta = {
        "plain": {},
        "yarn_L": {"deepseek2.rope.scaling.type": "yarn", "deepseek2.rope.scaling.factor": 4.0,
                   "deepseek2.rope.scaling.original_context_length": 64,
                   "deepseek2.rope.scaling.yarn_log_multiplier": 0.0707},
        "yarn_noL": {"deepseek2.rope.scaling.type": "yarn", "deepseek2.rope.scaling.factor": 4.0,
                     "deepseek2.rope.scaling.original_context_length": 64},
    }

    @staticmethod
    def expected_scales(variant, qk_head_dim):
        """(cos/sin magnitude, kq_scale) as the spec states them (L: the stored float32)."""
        d = math.sqrt(qk_head_dim)
        if variant == "plain":
            return 1.0, 1 / d
        if variant == "yarn_L":
            m = 1 + float(np.float32(0.0707)) * math.log(4.0)
            return 1.0, m * m / d
        m = 1 + 0.1 * math.log(4.0)
        return m, m * m / d

    def test_config_head_sizes_of_both_layouts(self):
        for layout in ("mla", "legacy"):
            ref = self.model("c" + layout, *make_deepseek2(layout=layout))
            c = ref.cfg
            self.assertEqual((c.head_dim, c.v_head_dim, c.n_rot, c.kv_lora_rank, c.n_head), (12, 6, 4, 16, 4), layout)
            self.assertEqual((c.rope_style, c.shared_kind, c.sigmoid_gating, c.renorm_topk),
                             (M.ROPE_NORM, "ungated", False, False))
            self.assertEqual(c.expert_weights_scale, 1.0)

    def test_mla_layout_equals_legacy_layout(self):
        # the same W_UK/W_UV stored as attn_k_b/attn_v_b or as attn_kv_b give the same logits
        for q_lora in (0, 16):
            kw = dict(seed=31, q_lora=q_lora, extra_meta=self.yarn_meta["yarn_L"])
            mla = self.model(f"m{q_lora}", *make_deepseek2(layout="mla", **kw))
            leg = self.model(f"l{q_lora}", *make_deepseek2(layout="legacy", **kw))
            a = mla.forward(self.toks)["logits"]
            b = leg.forward(self.toks)["logits"]
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(a).max(), err_msg=f"q_lora {q_lora}")
            for ref in (mla, leg):                 # every tensor of the files was read
                self.assertEqual(set(ref.reader.tensors) - set(ref.W.cache), set())
        # and the value up-projection matters: another attn_v_b moves the logits
        meta, T = make_deepseek2(layout="mla", seed=31)
        T["blk.1.attn_v_b.weight"] = T["blk.1.attn_v_b.weight"][:, ::-1].copy()
        c = self.model("mv", meta, T).forward(self.toks)["logits"]
        a = self.model("m0b", *make_deepseek2(layout="mla", seed=31)).forward(self.toks)["logits"]
        self.assertGreater(np.abs(c - a).max(), 1e-3)

    def test_plain_attention_equals_absorbed(self):
        rng = np.random.default_rng(5)
        x = torch.from_numpy(rng.standard_normal((9, 32)))
        pos = torch.arange(9) * 7                  # positions past the YaRN original context too
        for variant, extra in self.yarn_meta.items():
            for q_lora in (0, 16):
                ref = self.model(f"a{variant}{q_lora}", *make_deepseek2(seed=32, q_lora=q_lora, extra_meta=extra))
                mscale, kq = self.expected_scales(variant, 12)
                for L in range(2):
                    plain = M.mla_attention(ref.cfg, ref.W, L, x, pos)
                    absorbed = absorbed_mla_attention(ref.cfg, ref.W, L, x, pos, mscale, kq)
                    np.testing.assert_allclose(plain.numpy(), absorbed.numpy(), rtol=0,
                                               atol=1e-12 * absorbed.abs().max().item(), err_msg=variant)
        # the whole model with the absorbed attention swapped in
        ref = self.model("aw", *make_deepseek2(seed=33, q_lora=16, extra_meta=self.yarn_meta["yarn_noL"]))
        want = ref.forward(self.toks)["logits"]
        mscale, kq = self.expected_scales("yarn_noL", 12)
        orig = M.mla_attention
        M.mla_attention = lambda cfg, W, L, x, pos: absorbed_mla_attention(cfg, W, L, x, pos, mscale, kq)
        try:
            got = ref.forward(self.toks)["logits"]
        finally:
            M.mla_attention = orig
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())

    def test_yarn_scales(self):
        logits = {}
        for variant, extra in self.yarn_meta.items():
            for layout in ("mla", "legacy"):
                ref = self.model(f"y{variant}{layout}", *make_deepseek2(seed=34, layout=layout, extra_meta=extra))
                got = M.mla_scales(ref.cfg)
                want = self.expected_scales(variant, 12)   # qk_nope + n_rot, not the latent key_length 20
                self.assertAlmostEqual(got[0], want[0], places=14, msg=variant)
                self.assertAlmostEqual(got[1], want[1], places=14, msg=variant)
                logits[variant, layout] = ref.forward(self.toks)["logits"]
            if variant != "plain":
                self.assertEqual((ref.cfg.yarn_factor, ref.cfg.yarn_orig_ctx), (4.0, 64))
        self.assertEqual(ref.cfg.yarn_log_mul, 0.0)
        # L present: kq_scale (1 + 0.0707 ln 4)^2 = 1.2056 x plain, cos/sin 1;
        # L absent: both the cos/sin (1 + 0.1 ln 4 = 1.139) and kq_scale (1.2965 x)
        self.assertAlmostEqual(self.expected_scales("yarn_L", 12)[1] * math.sqrt(12), 1.2056, places=4)
        self.assertAlmostEqual(self.expected_scales("yarn_noL", 12)[1] * math.sqrt(12), 1.2965, places=4)
        for v in ("yarn_L", "yarn_noL"):
            self.assertGreater(np.abs(logits[v, "mla"] - logits["plain", "mla"]).max(), 1e-3, v)
        self.assertGreater(np.abs(logits["yarn_L", "mla"] - logits["yarn_noL", "mla"]).max(), 1e-3)

    def test_causal(self):
        for layout in ("mla", "legacy"):
            for q_lora, extra in ((0, {}), (16, self.yarn_meta["yarn_noL"])):
                ref = self.model(f"k{layout}{q_lora}", *make_deepseek2(seed=35, layout=layout, q_lora=q_lora,
                                                                      extra_meta=extra))
                full = ref.forward(self.toks)["logits"]
                pref = ref.forward(self.toks[:4])["logits"]
                np.testing.assert_allclose(full[:4], pref, rtol=0, atol=1e-12, err_msg=layout)
                self.assertTrue(np.all(np.isfinite(full)))
                self.assertGreater(np.abs(full[4] - full[3]).max(), 1e-6)

    def test_group_limit_hand_made(self):
        # 8 experts in 4 groups of 2, keep 2 groups, then the top 2 experts.
        # group scores (sum of the two largest): 0.75, 0.875, 0.25, 0.75 -> groups 1 and 0
        # (0 and 3 tie: lower index). The group max would have kept 0 and 3.
        s_ = torch.tensor([0.75, 0.0, 0.5, 0.375, 0.125, 0.125, 0.625, 0.125], dtype=torch.float64)
        masked, kept, margin = M.limit_to_groups(s_, 4, 2)
        self.assertEqual(kept, [0, 1])
        self.assertEqual(margin, 0.0)                       # the tie
        self.assertEqual(masked.tolist()[:4], s_.tolist()[:4])
        self.assertTrue(all(v == float("-inf") for v in masked.tolist()[4:]))
        self.assertEqual(M.topk_lowest_index_ties(masked, 2), [0, 2])
        self.assertEqual(M.topk_lowest_index_ties(s_, 2), [0, 6])   # without groups: expert 6 of group 3

    def test_grouped_sigmoid_routing_in_a_model(self):
        extra = {"deepseek2.expert_group_count": 4, "deepseek2.expert_group_used_count": 2,
                 "deepseek2.expert_weights_norm": True, "deepseek2.expert_weights_scale": 2.5}
        meta, T = make_deepseek2(seed=36, n_expert=8, n_used=3, gating=2, probs_bias=True, extra_meta=extra)
        ref = self.model("g", meta, T)
        cfg = ref.cfg
        self.assertEqual((cfg.sigmoid_gating, cfg.renorm_topk, cfg.expert_weights_scale), (True, True, 2.5))
        self.assertEqual((cfg.n_expert_groups, cfg.n_group_used), (4, 2))
        x = torch.from_numpy(np.random.default_rng(7).standard_normal((40, 32)))
        _, info = M.moe_ffn(cfg, ref.W, 1, x)
        bias = T["blk.1.exp_probs_b.bias"].astype(np.float64)
        logits = x.numpy() @ T["blk.1.ffn_gate_inp.weight"].astype(np.float64).T
        probs = 1 / (1 + np.exp(-logits))
        np.testing.assert_allclose(info.probs, probs, rtol=1e-13)
        for t in range(40):
            choice = probs[t] + bias
            gscore = [sum(sorted(choice[2 * g:2 * g + 2])) for g in range(4)]
            kept = sorted(sorted(range(4), key=lambda g: (-gscore[g], g))[:2])
            self.assertEqual(info.groups[t], kept)
            allowed = [e for e in range(8) if e // 2 in kept]
            sel = sorted(allowed, key=lambda e: (-choice[e], e))[:3]
            self.assertEqual(info.experts[t], sel)
            w = probs[t, sel] / probs[t, sel].sum() * 2.5       # unbiased probabilities, renormalised
            np.testing.assert_allclose(info.weights[t], w, rtol=1e-12)
        # without the group limit some tokens route elsewhere
        cfg.n_expert_groups = 0
        _, free = M.moe_ffn(cfg, ref.W, 1, x)
        self.assertGreater(sum(a != b for a, b in zip(info.experts, free.experts)), 0)
        self.assertTrue(any(e // 2 not in k for k, ex in zip(info.groups, free.experts) for e in ex))

    def test_softmax_default_and_dense_leading_layer(self):
        ref = self.model("s", *make_deepseek2(seed=37, n_dense=1))
        res = ref.forward(self.toks)
        self.assertEqual(sorted(res["routing"]), [1])            # layer 0 dense
        p = res["routing"][1].probs
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-13)   # softmax: gating key absent
        for w in res["routing"][1].weights:
            self.assertLess(sum(w), 1.0)                         # no renormalisation by default

    def test_q8_mode_keeps_latent_products_float(self):
        # All matrices Q8_0: every linear() gets the Q8_0 rounding; the per-head W_UK/W_UV
        # products never ask for an activation rounding (float inputs, as the engine).
        meta, T = make_deepseek2(seed=38, n_embd=32, n_head=2, qk_nope=32, n_rot=8, v_dim=16, kv_lora=32,
                                 q_lora=32, n_ff=32, n_expert=4)
        ref = self.model("q8", meta, T, q8_0=True, activations="q8")
        calls, asked = [], []
        orig_linear, orig_act = M.linear, ref.W.act

        def spy(x, w, b=None, act=None):
            calls.append(act)
            return orig_linear(x, w, b, act)

        def spy_act(name):
            asked.append(name)
            return orig_act(name)
        M.linear, ref.W.act = spy, spy_act
        try:
            ref.forward(self.toks)
        finally:
            M.linear = orig_linear
        n_tok = len(self.toks)
        # per layer q_a, q_b, kv_a_mqa, output; dense FFN 3 (layer 0); MoE layer: router,
        # 3 per (token, expert), 3 shared; the output matmul
        expect = 2 * 4 + 3 + (1 + 3 * n_tok * 2 + 3) + 1
        self.assertEqual(len(calls), expect)
        self.assertTrue(all(a is M.round_q8_0 for a in calls))
        self.assertFalse([n for n in asked if "k_b" in n or "v_b" in n or "kv_b" in n])
        # the q8 attention moves a little from the float one (whole logits would jump
        # wherever the rounding flips an expert choice)
        x = torch.from_numpy(np.random.default_rng(8).standard_normal((5, 32)))
        fl = self.model("q8f", meta, T, q8_0=True)
        f = M.mla_attention(fl.cfg, fl.W, 0, x, torch.arange(5))
        g = M.mla_attention(ref.cfg, ref.W, 0, x, torch.arange(5))
        rel = ((f - g).abs().max() / f.abs().max()).item()
        self.assertGreater(rel, 1e-5)
        self.assertLess(rel, 0.05)


def f16_round(v: float) -> float:
    """Nearest IEEE half, ties to even (Python's struct 'e' format)."""
    return struct.unpack("<e", struct.pack("<e", v))[0]


class TestActivationQuantisers(unittest.TestCase):
    def test_q8_0_scale_and_values(self):
        rng = np.random.default_rng(11)
        x = (rng.standard_normal((5, 96)) * rng.uniform(0.01, 10, (5, 1))).astype(np.float32)
        d, q = M.quantize_q8_0(x)
        self.assertEqual((d.dtype, q.dtype, d.shape, q.shape), (np.float16, np.int8, (5, 3), (5, 96)))
        for r in range(5):
            for b in range(3):
                blk = x[r, 32 * b:32 * b + 32]
                amax = max(abs(float(v)) for v in blk)
                d32 = np.float32(amax) / np.float32(127)
                self.assertEqual(float(d[r, b]), f16_round(float(d32)))
                inv = np.float32(1) / d32
                for j in range(32):
                    p = float(np.float32(blk[j]) * inv)       # float32 product, then round half even
                    self.assertEqual(int(q[r, 32 * b + j]), round(p))
                    self.assertLessEqual(abs(float(blk[j]) - float(d32) * int(q[r, 32 * b + j])),
                                         float(d32) * 0.5 * (1 + 1e-6))
                k = int(np.argmax(np.abs(blk)))
                self.assertEqual(int(q[r, 32 * b + k]), 127 if blk[k] > 0 else -127)
        v = M.dequantize_q8_0(d, q)
        np.testing.assert_array_equal(v, d.astype(np.float64).repeat(32, axis=1) * q)

    def test_q8_0_ties_to_even(self):
        # amax 127 -> d = 1, inverse 1: q = round(x), halves go to the even integer
        x = np.zeros(32, np.float32)
        x[:9] = [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 3.4999998]
        d, q = M.quantize_q8_0(x)
        self.assertEqual(float(d[0]), 1.0)
        self.assertEqual(q[:9].tolist(), [127, 0, 2, 2, 0, -2, -2, 126, 3])

    def test_q8_0_f16_scale_ties_to_even(self):
        # scales exactly halfway between two halves round to the even mantissa
        lo = np.float16(0.0400390625)                         # some half; next one up:
        hi = np.nextafter(lo, np.float16(1))
        mid = (np.float32(lo) + np.float32(hi)) / 2           # exact in float32
        found = 0
        for amax in (np.float32(mid) * np.float32(127), np.nextafter(np.float32(mid) * 127, np.float32(0))):
            if np.float32(amax) / np.float32(127) != mid:
                continue
            x = np.zeros(32, np.float32)
            x[3] = -amax
            d, q = M.quantize_q8_0(x)
            even = lo if (lo.view(np.uint16) & 1) == 0 else hi
            self.assertEqual(d[0], even)
            self.assertEqual(q[3], -127)
            found += 1
        self.assertGreater(found, 0)
        # numpy's f32 -> f16 rounding agrees with struct's ties-to-even on many scales
        vals = np.random.default_rng(2).uniform(1e-4, 1.0, 5000).astype(np.float32)
        np.testing.assert_array_equal(vals.astype(np.float16).astype(np.float64),
                                      [f16_round(float(v)) for v in vals])

    def test_q8_0_zero_block(self):
        x = np.zeros((2, 64), np.float32)
        x[1, 40] = -3.0
        d, q = M.quantize_q8_0(x)
        self.assertEqual(d.tolist(), [[0, 0], [0, f16_round(3.0 / 127)]])
        self.assertFalse(q[0].any() or q[1, :32].any())
        self.assertEqual(int(q[1, 40]), -127)
        self.assertTrue(np.all(np.isfinite(M.dequantize_q8_0(d, q))))

    def test_q8_k_scale_and_values(self):
        rng = np.random.default_rng(12)
        x = (rng.standard_normal((3, 512)) * 0.7).astype(np.float32)
        d, q = M.quantize_q8_k(x)
        self.assertEqual((d.dtype, q.dtype, d.shape, q.shape), (np.float32, np.int8, (3, 2), (3, 512)))
        for r in range(3):
            for b in range(2):
                blk = x[r, 256 * b:256 * b + 256]
                k = max(range(256), key=lambda j: (abs(float(blk[j])), -j))   # largest |x|, first
                iscale = np.float32(-127) / blk[k]
                self.assertEqual(d[r, b], np.float32(1) / iscale)        # float32, not rounded to f16
                self.assertEqual(int(q[r, 256 * b + k]), -127)           # the largest maps to -127
                expect = [min(127, round(float(iscale * v))) for v in blk]
                self.assertEqual(q[r, 256 * b:256 * b + 256].tolist(), expect)
                vals = M.dequantize_q8_k(d, q)[r, 256 * b:256 * b + 256]
                self.assertLessEqual(np.abs(vals - blk).max(), abs(float(d[r, b])) * 0.5 * (1 + 1e-6))
                self.assertAlmostEqual(vals[k], float(blk[k]), delta=abs(float(blk[k])) * 1e-6)

    def test_q8_k_ties(self):
        # equal magnitudes: the first one decides the sign of the scale
        for first, second in ((3.0, -3.0), (-3.0, 3.0)):
            x = np.zeros(256, np.float32)
            x[5], x[9] = first, second
            d, q = M.quantize_q8_k(x)
            self.assertEqual((int(q[5]), int(q[9])), (-127, 127))
            self.assertEqual(d[0], np.float32(1) / (np.float32(-127) / np.float32(first)))
        # max = -127 -> iscale = 1: q = round(x), halves to even
        x = np.zeros(256, np.float32)
        x[:8] = [-127, 0.5, 1.5, 2.5, -0.5, -3.5, 126.5, 127]
        d, q = M.quantize_q8_k(x)
        self.assertEqual(float(d[0]), 1.0)
        self.assertEqual(q[:8].tolist(), [-127, 0, 2, 2, 0, -4, 126, 127])

    def test_q8_k_zero_block(self):
        x = np.zeros((1, 512), np.float32)
        x[0, 300] = 0.25
        d, q = M.quantize_q8_k(x)
        self.assertEqual(d.tolist(), [[0.0, float(np.float32(1) / (np.float32(-127) / np.float32(0.25)))]])
        self.assertFalse(q[0, :256].any())
        self.assertEqual(int(q[0, 300]), -127)
        self.assertTrue(np.all(np.isfinite(M.dequantize_q8_k(d, q))))

    def test_mode_table(self):
        q8 = M.ACTIVATION_MODES["q8"]
        for t in (M.T_Q8_0, M.T_Q4_0):
            self.assertIs(q8[t], M.round_q8_0)
        for t in (M.T_Q4_K, M.T_Q5_K, M.T_Q6_K):
            self.assertIs(q8[t], M.round_q8_k)
        for t in (0, M.T_F16, M.T_BF16):            # float weights: exact float activations
            self.assertNotIn(t, q8)
        self.assertEqual(M.ACTIVATION_MODES["float"], {})

    def test_torch_rounding_uses_float32_rows(self):
        # a float64 input is rounded to float32 first, then quantised; the result keeps the dtype
        x = torch.from_numpy(np.random.default_rng(3).standard_normal((4, 64)))
        y = M.round_q8_0(x)
        self.assertEqual(y.dtype, torch.float64)
        d, q = M.quantize_q8_0(x.numpy().astype(np.float32))
        np.testing.assert_array_equal(y.numpy(), M.dequantize_q8_0(d, q))
        z = M.round_q8_k(torch.from_numpy(np.random.default_rng(4).standard_normal((2, 256))).float())
        self.assertEqual(z.dtype, torch.float32)


class TestQ8Activations(Base):
    toks = [3, 17, 5, 42, 0, 9, 9]

    def test_every_matmul_of_a_q8_0_model_is_quantised(self):
        # All matrices Q8_0: in "q8" mode every linear() gets the Q8_0 rounding, in
        # "float" mode none. Count: per layer q, k, v, o, router, 3 per (token, expert),
        # 3 shared-expert matmuls and the shared gate (F32 vector: not quantised); output.
        for arch in ("qwen2moe", "deepseek", "llama"):
            kw = dict(n_ff=32, n_shared=1) if arch != "llama" else dict(n_ff=32)
            if arch == "deepseek":
                kw["n_dense"] = 1
            meta, T = make_model(arch, seed=21, **kw)
            calls = []
            orig = M.linear

            def spy(x, w, b=None, act=None):
                calls.append(act)
                return orig(x, w, b, act)
            ref = self.model(arch + "q", meta, T, q8_0=True, activations="q8")
            M.linear = spy
            try:
                ref.forward(self.toks)
                q8_calls = list(calls)
                calls.clear()
                ref.W.activations = "float"
                ref.forward(self.toks)
            finally:
                M.linear = orig
            n_tok, n_layer = len(self.toks), 2
            n_moe = n_layer - (1 if arch == "deepseek" else 0)
            expect = n_layer * 4 + 1 + n_moe * (1 + 3 * n_tok * 2)
            expect += 3 * (n_layer - n_moe)                       # deepseek's dense FFN
            if arch != "llama":
                expect += n_moe * 3                               # shared expert
            gate_vec = n_moe if arch == "qwen2moe" else 0         # F32 shared-expert gate
            self.assertEqual(len(q8_calls), expect + gate_vec, arch)
            self.assertEqual(sum(a is M.round_q8_0 for a in q8_calls), expect, arch)
            self.assertEqual(sum(a is None for a in q8_calls), gate_vec, arch)
            self.assertTrue(all(a is None for a in calls), arch)

    def test_q8_mode_changes_only_quantised_models(self):
        meta, T = make_model("olmoe", seed=22, n_ff=32)
        f = self.model("of", meta, T, f16=True).forward(self.toks)["logits"]
        g = self.model("og", meta, T, f16=True, activations="q8").forward(self.toks)["logits"]
        np.testing.assert_array_equal(f, g)                     # F16 weights: float activations
        a = self.model("oa", meta, T, q8_0=True).forward(self.toks)["logits"]
        b = self.model("ob", meta, T, q8_0=True, activations="q8").forward(self.toks)["logits"]
        rel = np.abs(a - b).max() / np.abs(a).max()
        self.assertGreater(rel, 1e-4)                           # activation rounding is visible
        self.assertLess(rel, 0.1)                               # but a small perturbation


if __name__ == "__main__":
    unittest.main(verbosity=1)
