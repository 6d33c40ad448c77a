#!/usr/bin/env python3
"""Plain PyTorch reference forward pass of the GGUF SwiGLU-MoE family
(llama/Mixtral, qwen2moe, qwen3moe, olmoe, deepseek v1, deepseek2, glm4moe, gpt-oss,
qwen35moe, minimax-m2),
written from the specification (/work/shared/GGUF-NOTES.md; glm4moe from llama.cpp's
glm4_moe graph and the GLM-4.5 model cards; deepseek2 from llama.cpp's deepseek2 graph
and loader and DeepSeek-V2's modeling_deepseek.py), independently of moechat's C++
engine.  Readable over fast: whole sequence at once, no KV cache, one function per
block, float64 by default.

Activations (the `activations` argument, CLI --activations): "float" feeds every
matmul its exact input; "q8" first replaces the input rows of each matmul whose
weight is Q8_0/Q4_0 (Q4_K/Q5_K/Q6_K) by their Q8_0 (Q8_K) block quantisation,
as GGUF engines' integer dot products see them (see quantize_q8_0/quantize_q8_k).
The goldens use "q8"; the CLI defaults to it; the Python API to "float".

    /usr/bin/python3 tools/reference/moe_reference.py model.gguf --tokens 1 2 3
    /usr/bin/python3 tools/reference/moe_reference.py model.gguf --tokens 1 2 3 \
        --dtype float32 --dump-hidden hidden.npz

Mapping to Hugging Face transformers (for the later HF cross-check)
-------------------------------------------------------------------
  GGUF tensor                      HF module (Mixtral / Qwen2Moe / Qwen3Moe / Olmoe / DeepSeek)
  token_embd.weight                model.embed_tokens.weight
  blk.N.attn_norm.weight           layers.N.input_layernorm.weight
  blk.N.attn_{q,k,v}.weight/.bias  layers.N.self_attn.{q,k,v}_proj.weight/.bias
  blk.N.attn_output.weight         layers.N.self_attn.o_proj.weight
  blk.N.attn_{q,k}_norm.weight     layers.N.self_attn.{q,k}_norm.weight  (qwen3moe: per head; olmoe: whole vector)
  blk.N.ffn_norm.weight            layers.N.post_attention_layernorm.weight
  blk.N.post_attention_norm.weight the same, as glm4moe files name it
  blk.N.exp_probs_b.bias           mlp.gate.e_score_correction_bias (glm4moe)
  blk.N.ffn_gate_inp.weight        layers.N.{block_sparse_moe,mlp}.gate.weight   (router)
  blk.N.ffn_{gate,up,down}_exps    experts[e].{w1,w3,w2} (Mixtral) / experts[e].{gate,up,down}_proj, stacked on dim 0
  blk.N.ffn_{gate,up,down}_shexp   mlp.shared_expert(s).{gate,up,down}_proj
  blk.N.ffn_gate_inp_shexp.weight  mlp.shared_expert_gate.weight (qwen2moe, Linear(hidden, 1))
  blk.N.ffn_{gate,up,down}.weight  mlp.{gate,up,down}_proj (deepseek leading dense layers)
  output_norm.weight               model.norm.weight
  output.weight                    lm_head.weight  (absent => tied to token_embd)

  deepseek2 attention (HF DeepseekV2Attention, layers.N.self_attn.*):
  blk.N.attn_q.weight              q_proj.weight                 (no q compression: q_lora_rank absent/0, V2-Lite)
  blk.N.attn_q_a.weight            q_a_proj.weight               (q compression: V2, GLM-4.7-Flash)
  blk.N.attn_q_a_norm.weight       q_a_layernorm.weight
  blk.N.attn_q_b.weight            q_b_proj.weight
  blk.N.attn_kv_a_mqa.weight       kv_a_proj_with_mqa.weight     (rows: kv_lora latent, then the n_rot shared rope key)
  blk.N.attn_kv_a_norm.weight      kv_a_layernorm.weight
  blk.N.attn_kv_b.weight           kv_b_proj.weight              (legacy files: as HF, rows per head [k_nope | v])
  blk.N.attn_k_b.weight            kv_b_proj.weight, per head its k_nope rows transposed: (n_head, kv_lora, qk_nope)
  blk.N.attn_v_b.weight            kv_b_proj.weight, per head its v rows: (n_head, v_head_dim, kv_lora)
  blk.N.attn_output.weight         o_proj.weight
  blk.N.exp_probs_b.bias           mlp.gate.e_score_correction_bias (sigmoid-gated files: GLM-4.7-Flash)

Where GGUF differs from HF:
  * llama (Mixtral) and deepseek GGUF files use NORM RoPE (rotate adjacent
    pairs x[2i], x[2i+1]).  HF Llama/Mixtral/DeepSeek code uses rotate_half
    (pairs x[i], x[i+d/2]); llama.cpp's convert_hf_to_gguf.py permutes the rows
    of q_proj/k_proj per head (the "permute" for llama) so that NORM RoPE on
    the permuted rows equals HF rotate_half on the original rows.  To compare
    with HF, un-permute attn_q/attn_k: for each head, rows
    [0,2,4,...,d-2, 1,3,...,d-1] of the GGUF head become HF rows [0..d/2-1, d/2..d-1],
    i.e.  hf = gguf.reshape(n_head, d//2, 2, n_embd).transpose(1, 2).reshape(...).
    (Synthetic models have no HF counterpart; their weights are simply used
    as stored.)  qwen2moe/qwen3moe/olmoe GGUF use NEOX = HF rotate_half, no permutation.
  * Top-k routing: Mixtral's HF code takes softmax over all experts then
    renormalises the top-k, which equals softmax over the top-k logits.
    Qwen2Moe/Olmoe (norm_topk_prob=False) and DeepSeek v1 do not renormalise;
    Qwen3Moe (norm_topk_prob=True) does.  DeepSeek multiplies by
    routed_scaling_factor (GGUF expert_weights_scale, default 1).
  * GGUF matrices are stored {n_in, n_out} in ne order = numpy (n_out, n_in),
    exactly torch.nn.Linear.weight: y = x @ W.T.

deepseek2 (DeepSeek-V2/V2-Lite, GLM-4.7-Flash): multi-head latent attention
(mla_attention).  Sources: llama.cpp src/models/deepseek2.cpp (graph), its loader
(llama-model.cpp) and llama-context.cpp (YaRN attn_factor), HF modeling_deepseek.py.
  * Head sizes: files in the "MLA" layout (llama.cpp's converter since 2025: attn_k_b
    and attn_v_b) carry attention.key_length_mla = qk_nope + qk_rope and
    value_length_mla = v_head_dim, and key_length = kv_lora + n_rot, value_length =
    kv_lora, head_count_kv = 1 for the absorbed cache (ignored here); legacy files
    (attn_kv_b) have no *_mla keys and key_length = qk_nope + qk_rope.
    qk_rope = rope.dimension_count.
  * Computed the plain way: per head k_nope_h = W_UK_h c and v_h = W_UV_h c from the
    rms-normed latent c; the rope key k_pe (not normed) is one head shared by all.
    Engines absorb W_UK_h into the query and W_UV_h after the softmax; this is the
    independent check of that.  In "q8" activations mode the W_UK/W_UV products get
    float inputs (engines run them from dequantised weights), every other matmul
    follows its weight type.
  * RoPE: NORM (adjacent pairs) on the last n_rot dims of q and on k_pe, no row
    permutation: HF's DeepSeek-V2 de-interleaves q_pe/k_pe before rotate_half, which
    is NORM on the stored rows.
  * YaRN (factor f > 1, frequencies as yarn_frequencies), as llama.cpp since its
    PR 17945 (rope.scaling.yarn_log_multiplier L is stored as 0.1 * mscale_all_dim):
    L != 0: cos/sin unscaled, kq_scale = (1 + L ln f)^2 / sqrt(qk_head_dim)
    (= HF: mscale == mscale_all_dim cancels on cos/sin, softmax_scale * mscale^2);
    L absent: cos/sin scaled by 1 + 0.1 ln f and kq_scale = (1 + 0.1 ln f)^2 /
    sqrt(qk_head_dim) (llama.cpp's; HF with mscale_all_dim 0 would leave kq_scale
    1/sqrt(qk_head_dim)).  See mla_scales.
  * Routing: softmax or sigmoid (expert_gating_func; absent = softmax as llama.cpp
    for old V2 files), exp_probs_b added for the choice only, renormalisation from
    expert_weights_norm (default off), times expert_weights_scale.  Group-limited
    choice (expert_group_count > 1) as llama.cpp's build_moe_ffn for every arch:
    group score = sum of its two largest choice scores (DeepSeek-V3's noaux_tc; HF
    DeepSeek-V2's group_limited_greedy takes the group's largest instead).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_read import (GGUFReader, GRID_TYPES, T_BF16, T_F16, T_IQ4_NL, T_IQ4_XS, T_MXFP4,  # noqa: E402
                       T_Q2_K, T_Q3_K, T_Q4_0, T_Q4_1, T_Q4_K, T_Q5_0, T_Q5_1, T_Q5_K, T_Q6_K, T_Q8_0)

ROPE_NORM = "norm"   # rotate (x[2i], x[2i+1])
ROPE_NEOX = "neox"   # rotate (x[i], x[i + n_rot/2])

# Per-architecture semantics (GGUF-NOTES.md table).
ARCH_TABLE = {
    #            rope       renorm top-k  shared expert kind   qk-norm kind
    "llama":    (ROPE_NORM, True,  None,        None),
    "qwen2moe": (ROPE_NEOX, False, "sigmoid",   None),
    "qwen3moe": (ROPE_NEOX, True,  None,        "per_head"),
    "olmoe":    (ROPE_NEOX, False, None,        "whole"),
    "deepseek": (ROPE_NORM, False, "ungated",   None),
    # GLM-4.5: sigmoid router with a selection bias, last nextn_predict_layers blocks
    # not run, q/k norm per head only where the file has the tensors.
    "glm4moe":  (ROPE_NEOX, True,  "ungated",   "per_head_if_present"),
    # DeepSeek-V2 / GLM-4.7-Flash: multi-head latent attention; gating and
    # renormalisation from the file's keys (see config_from_gguf).
    "deepseek2": (ROPE_NORM, False, "ungated",  None),
    # gpt-oss (OpenAI's model card and reference code, llama.cpp's openai_moe graph):
    # biases everywhere, sink logits, even layers in a sliding window, YaRN, the
    # router's softmax over its top-k logits, the clamped SwiGLU.
    "gpt-oss":  (ROPE_NEOX, True,  None,        None),
    # Qwen3.5 / Qwen3.6 MoE (llama.cpp's qwen35moe graph and loader, its delta-net
    # builder, convert_hf_to_gguf.py's Qwen3Next / Qwen3.5 classes): gated delta-net
    # layers beside full attention with a joint query + gate projection (see
    # delta_net / gated_attention); one sigmoid-gated shared expert.
    "qwen35moe": (ROPE_NEOX, True, "sigmoid",   "per_head"),
    # MiniMax-M2 / M2.1 (llama.cpp's src/models/minimax-m2.cpp and its converter's
    # MiniMaxM2Model): q and k each RMS-normed over the whole projection (weights of
    # n_head x head_dim and n_head_kv x head_dim) before the split into heads, NEOX rope
    # on the first rope.dimension_count dims of each head (64 of 128), a sigmoid router
    # whose exp_probs_b picks the experts while the unbiased scores, renormalised over
    # the chosen k, weight them; no shared expert.
    "minimax-m2": (ROPE_NEOX, True, None,       "whole"),
    # Gemma 4 MoE (llama.cpp's src/models/gemma4.cpp graph and loader, conversion/gemma.py
    # Gemma4Model): sliding and global layers of their own head sizes, shared-KV layers,
    # a dense GELU MLP beside GELU experts, many norms; see gemma4_block.
    "gemma4":   (ROPE_NEOX, True,  None,        "per_head"),
}


# ---- activation quantisation --------------------------------------------------
# The GGUF family's quantised matmuls ("vec_dot" types) quantise the float32
# activation rows to 8-bit blocks before dotting them with the weight rows:
#   the 32-blocks' weights -> Q8_0 blocks of 32:  d = amax/127 (stored as f16), q = round(x/d)
#   K-quant, IQ4_XS, grid   -> Q8_K blocks of 256: max = the element of largest |x| (the
#                             first one), iscale = -127/max, q = min(127, round(iscale*x)),
#                             d = 1/iscale (float32)
# Rounding here is to nearest, ties to even (as moechat's engine), every step in
# float32 (numpy float32).
# With activations="q8" the reference replaces the input rows of every matmul with a
# quantised weight by the values these blocks stand for (d*q, exact in float64).

Q8_0_BLOCK = 32
Q8_K_BLOCK = 256


def q8_0_scaled(x: np.ndarray):
    """x: float32 (..., n), n a multiple of 32 -> (d float32 (..., n/32), t float32
    (..., n/32, 32)): the block scale before its f16 rounding, and x/d as computed
    (x * (1/d), float32) before rounding to an integer."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(*x.shape[:-1], x.shape[-1] // Q8_0_BLOCK, Q8_0_BLOCK)
    amax = np.abs(b).max(axis=-1, keepdims=True)                     # float32
    d = amax / np.float32(127)                                       # float32 division
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    return d[..., 0], b * inv                                        # float32 product


def quantize_q8_0(x: np.ndarray):
    """x: float32 (..., n), n a multiple of 32 -> (d float16 (..., n/32), q int8 (..., n))."""
    d, t = q8_0_scaled(x)
    q = np.rint(t)                                                   # ties to even
    return d.astype(np.float16), q.astype(np.int8).reshape(*t.shape[:-2], -1)


def dequantize_q8_0(d: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Values the Q8_0 blocks stand for, float64: d (f16) * q."""
    b = q.reshape(*q.shape[:-1], q.shape[-1] // Q8_0_BLOCK, Q8_0_BLOCK).astype(np.float64)
    return (d.astype(np.float64)[..., None] * b).reshape(q.shape)


def q8_k_scaled(x: np.ndarray):
    """x: float32 (..., n), n a multiple of 256 -> (d float32 (..., n/256), t float32
    (..., n/256, 256)): the block scale 1/iscale and iscale * x before rounding."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(*x.shape[:-1], x.shape[-1] // Q8_K_BLOCK, Q8_K_BLOCK)
    first = np.argmax(np.abs(b), axis=-1)[..., None]                 # first index of the largest |x|
    mx = np.take_along_axis(b, first, axis=-1)                       # signed, (..., nb, 1)
    nz = mx != 0
    iscale = np.divide(np.float32(-127), mx, out=np.zeros_like(mx), where=nz)
    d = np.divide(np.float32(1), iscale, out=np.zeros_like(iscale), where=nz)
    return d[..., 0], iscale * b                                     # all-zero block: d = 0, t = 0


def quantize_q8_k(x: np.ndarray):
    """x: float32 (..., n), n a multiple of 256 -> (d float32 (..., n/256), q int8 (..., n))."""
    d, t = q8_k_scaled(x)
    q = np.minimum(np.float32(127), np.rint(t))                      # ties to even
    return d, q.astype(np.int8).reshape(*t.shape[:-2], -1)


def dequantize_q8_k(d: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Values the Q8_K blocks stand for, float64: d (f32) * q."""
    b = q.reshape(*q.shape[:-1], q.shape[-1] // Q8_K_BLOCK, Q8_K_BLOCK).astype(np.float64)
    return (d.astype(np.float64)[..., None] * b).reshape(q.shape)


def _torch_rows(quantize, dequantize):
    """Activation rounding for linear(): the rows as float32 (what a float32 engine
    holds), quantised, and the values they stand for in the input's dtype."""
    def apply(x: torch.Tensor) -> torch.Tensor:
        a = x.detach().to(torch.float32).numpy()
        return torch.from_numpy(dequantize(*quantize(a))).to(x.dtype)
    return apply


def _round_f16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(x.dtype)


def _round_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(x.dtype)


round_q8_0 = _torch_rows(quantize_q8_0, dequantize_q8_0)
round_q8_k = _torch_rows(quantize_q8_k, dequantize_q8_k)

# activations mode -> weight type -> rounding of the matmul's input rows (absent: exact)
ACTIVATION_MODES = {
    "float": {},
    "q8": {T_Q8_0: round_q8_0, T_Q4_0: round_q8_0, T_Q4_1: round_q8_0, T_Q5_0: round_q8_0,
           T_Q5_1: round_q8_0, T_IQ4_NL: round_q8_0, T_MXFP4: round_q8_0,
           T_Q2_K: round_q8_k, T_Q3_K: round_q8_k, T_Q4_K: round_q8_k, T_Q5_K: round_q8_k,
           T_Q6_K: round_q8_k, T_IQ4_XS: round_q8_k, **{t: round_q8_k for t in GRID_TYPES}},
}
# "ggml": also rounds the input of F16/BF16 matmuls to f16/bf16, as ggml's CPU
# matmul does (diagnostic; moechat dots float weights with float32 activations).
ACTIVATION_MODES["ggml"] = {**ACTIVATION_MODES["q8"], T_F16: _round_f16, T_BF16: _round_bf16}


@dataclass
class Config:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int                    # deepseek2: the q/k head size qk_nope + n_rot
    n_rot: int
    n_vocab: int
    eps: float
    rope_base: float
    rope_style: str
    n_expert: int
    n_expert_used: int
    renorm_topk: bool
    expert_weights_scale: float
    n_leading_dense: int
    shared_kind: Optional[str]
    qk_norm_kind: Optional[str]
    sigmoid_gating: bool = False
    n_nextn: int = 0
    sliding_window: int = 0          # gpt-oss: even layers see the last `sliding_window` keys
    yarn_factor: float = 1.0         # > 1: YaRN RoPE
    yarn_orig_ctx: int = 0
    n_expert_groups: int = 0         # > 1 (with 0 < n_group_used < it): group-limited routing
    n_group_used: int = 0
    # deepseek2 (multi-head latent attention)
    kv_lora_rank: int = 0
    v_head_dim: int = 0
    yarn_log_mul: float = 0.0        # rope.scaling.yarn_log_multiplier as stored (0.1 * mscale_all_dim)
    # qwen35moe
    recurrent: List[bool] = field(default_factory=list)   # per layer run: a delta-net layer
    rope_sections: List[int] = field(default_factory=list)
    ssm_conv_kernel: int = 0
    ssm_head: int = 0                # ssm.state_size: key and value head width
    ssm_k_heads: int = 0             # ssm.group_count
    ssm_v_heads: int = 0             # ssm.time_step_rank
    # gemma4 (per layer run)
    swa: List[bool] = field(default_factory=list)
    layer_head_dim: List[int] = field(default_factory=list)
    layer_kv_heads: List[int] = field(default_factory=list)
    layer_rot: List[int] = field(default_factory=list)
    kv_source: List[int] = field(default_factory=list)
    rope_base_swa: float = 0.0
    logit_softcap: float = 0.0
    warnings: List[str] = field(default_factory=list)


def config_from_gguf(r: GGUFReader) -> Config:
    arch = r.arch
    if arch not in ARCH_TABLE:
        raise ValueError(f"architecture {arch!r} not supported by the reference")
    rope_style, renorm, shared_kind, qk_kind = ARCH_TABLE[arch]
    warnings: List[str] = []

    def key(name, default=None, required=False):
        k = f"{arch}.{name}"
        if k in r.metadata:
            return r.metadata[k]
        if required:
            raise KeyError(f"missing metadata {k}")
        if default is not None:
            warnings.append(f"{k} absent, using default {default}")
        return default

    n_embd = int(key("embedding_length", required=True))
    n_head = int(key("attention.head_count", required=True))
    mla = arch == "deepseek2"
    if mla:
        head_dim, v_head_dim, n_head_kv = mla_head_sizes(r, n_head)
        n_rot = int(key("rope.dimension_count", required=True))
        if not 0 < n_rot < head_dim or n_rot % 2:
            raise ValueError(f"rope.dimension_count {n_rot} does not fit the q/k head size {head_dim}")
    elif arch == "gemma4":
        n_head_kv, head_dim, n_rot, v_head_dim = 0, 0, 0, 0   # per layer: gemma4_config
    else:
        n_head_kv = int(key("attention.head_count_kv", n_head))
        if arch == "minimax-m2":  # its converter always writes these; head_dim != n_embd / n_head
            for k_ in ("attention.key_length", "rope.dimension_count", "expert_feed_forward_length"):
                key(k_, required=True)
        head_dim = int(r.metadata.get(f"{arch}.attention.key_length", n_embd // n_head))
        v_len = r.metadata.get(f"{arch}.attention.value_length", head_dim)
        if int(v_len) != head_dim:
            raise ValueError(f"value_length {v_len} != key_length {head_dim}: not supported")
        v_head_dim = head_dim
        n_rot = int(r.metadata.get(f"{arch}.rope.dimension_count", head_dim))
    n_vocab = int(r.tensors["token_embd.weight"].ne[1])

    # Metadata that could contradict the per-arch table: report, follow the table
    # (glm4moe: the file's keys decide, as GLM-4.5's converter writes them).
    gating = r.metadata.get(f"{arch}.expert_gating_func")
    sigmoid = False
    if arch == "glm4moe":
        sigmoid = gating is None or int(gating) == 2
        renorm = bool(r.metadata.get("glm4moe.expert_weights_norm", True))
    elif arch == "deepseek2":
        # llama.cpp: absent = softmax (old DeepSeek-V2 files), 1 softmax, 2 sigmoid
        if gating is not None and int(gating) not in (1, 2):
            raise ValueError(f"deepseek2.expert_gating_func={gating}: not softmax (1) or sigmoid (2)")
        sigmoid = gating is not None and int(gating) == 2
        renorm = bool(r.metadata.get("deepseek2.expert_weights_norm", False))
    elif arch == "minimax-m2":
        # scoring_func "sigmoid" in its config.json; the graph always renormalises.
        if gating is not None and int(gating) not in (1, 2):
            raise ValueError(f"minimax-m2.expert_gating_func={gating}: not softmax (1) or sigmoid (2)")
        sigmoid = gating is None or int(gating) == 2
        renorm = True
    elif gating is not None and int(gating) != 1:
        warnings.append(f"{arch}.expert_gating_func={gating} (not softmax); reference uses softmax")
    wnorm = r.metadata.get(f"{arch}.expert_weights_norm")
    if arch not in ("glm4moe", "deepseek2", "minimax-m2") and wnorm is not None and bool(wnorm) != renorm:
        warnings.append(f"{arch}.expert_weights_norm={wnorm} but arch table says renorm={renorm}; using table")

    # Group-limited routing, as llama.cpp's build_moe_ffn applies for any arch whose
    # file has the keys; absent, 1 group or all groups used = plain top-k.
    n_groups = int(r.metadata.get(f"{arch}.expert_group_count", 0))
    n_group_used = int(r.metadata.get(f"{arch}.expert_group_used_count", 0))
    n_expert = int(key("expert_count", required=True))
    if n_groups > 1 and 0 < n_group_used < n_groups:
        if n_expert % n_groups:
            raise ValueError(f"{n_expert} experts do not split into {n_groups} groups")
        if n_group_used * (n_expert // n_groups) < int(key("expert_used_count", required=True)):
            raise ValueError(f"{n_group_used} of {n_groups} groups hold fewer experts than expert_used_count")

    scale = 1.0
    if arch in ("deepseek", "deepseek2", "glm4moe"):
        scale = float(r.metadata.get(f"{arch}.expert_weights_scale", 1.0))
    elif f"{arch}.expert_weights_scale" in r.metadata:
        warnings.append(f"{arch}.expert_weights_scale present but unused by this arch")

    n_nextn = int(r.metadata.get(f"{arch}.nextn_predict_layers", 0))
    yarn = r.metadata.get(f"{arch}.rope.scaling.type") == "yarn"
    # YaRN's original context: llama.cpp falls back to the training context
    orig_ctx = r.metadata.get(f"{arch}.rope.scaling.original_context_length",
                              r.metadata.get(f"{arch}.context_length", 0))
    if yarn and mla and float(r.metadata.get(f"{arch}.rope.scaling.attn_factor", 1.0)) != 1.0:
        warnings.append(f"{arch}.rope.scaling.attn_factor != 1 ignored")
    n_layer_all = int(key("block_count", required=True))
    q35 = {}
    if arch == "qwen35moe":
        md = r.metadata
        flags = md.get("qwen35moe.attention.recurrent_layers")
        if flags is not None:
            recurrent = [bool(f) for f in flags][: n_layer_all - n_nextn]
        else:
            interval = int(md.get("qwen35moe.full_attention_interval", 4))
            recurrent = [(i + 1) % interval != 0 for i in range(n_layer_all - n_nextn)]
        hk = int(md["qwen35moe.ssm.state_size"])
        nv = int(md["qwen35moe.ssm.time_step_rank"])
        if int(md["qwen35moe.ssm.inner_size"]) != nv * hk:
            raise ValueError("qwen35moe: ssm.inner_size != time_step_rank * state_size")
        q35 = dict(recurrent=recurrent, rope_sections=[int(x) for x in md["qwen35moe.rope.dimension_sections"]],
                   ssm_conv_kernel=int(md["qwen35moe.ssm.conv_kernel"]), ssm_head=hk,
                   ssm_k_heads=int(md["qwen35moe.ssm.group_count"]), ssm_v_heads=nv)
    g4 = gemma4_config(r.metadata, n_layer_all, n_head) if arch == "gemma4" else {}
    return Config(
        **q35,
        **g4,
        arch=arch,
        n_layer=n_layer_all - n_nextn,
        n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim,
        n_rot=n_rot, n_vocab=n_vocab,
        eps=float(key("attention.layer_norm_rms_epsilon", required=True)),
        rope_base=float(key("rope.freq_base", 10000.0)),
        rope_style=rope_style,
        n_expert=n_expert,
        n_expert_used=int(key("expert_used_count", required=True)),
        renorm_topk=renorm,
        expert_weights_scale=scale,
        n_leading_dense=int(r.metadata.get(f"{arch}.leading_dense_block_count", 0)),
        shared_kind=shared_kind,
        qk_norm_kind=qk_kind,
        sigmoid_gating=sigmoid,
        n_nextn=n_nextn,
        **({} if arch == "gemma4" else dict(
            sliding_window=int(r.metadata.get(f"{arch}.attention.sliding_window", 0)) if arch == "gpt-oss" else 0)),
        yarn_factor=float(r.metadata.get(f"{arch}.rope.scaling.factor", 1.0)) if yarn else 1.0,
        yarn_orig_ctx=int(orig_ctx) if yarn else 0,
        n_expert_groups=n_groups,
        n_group_used=n_group_used,
        kv_lora_rank=int(key("attention.kv_lora_rank", required=True)) if mla else 0,
        v_head_dim=v_head_dim,
        yarn_log_mul=float(r.metadata.get(f"{arch}.rope.scaling.yarn_log_multiplier", 0.0)) if yarn else 0.0,
        warnings=warnings,
    )


def gemma4_config(md, n_layer: int, n_head: int) -> dict:
    """gemma4's per-layer shapes, read as llama.cpp's gemma4 loader reads them: the
    sliding_window_pattern flags, key_length(_swa) head sizes, rope.dimension_count(_swa),
    head_count_kv per layer or one value, the last shared_kv_layers layers reading the
    K/V of layer n_kv - 2 (sliding) or n_kv - 1 (global)."""
    pattern = [bool(x) for x in md["gemma4.attention.sliding_window_pattern"]]
    if len(pattern) != n_layer:
        raise ValueError("gemma4: sliding_window_pattern length != block_count")
    hd_full = int(md["gemma4.attention.key_length"])
    hd_swa = int(md["gemma4.attention.key_length_swa"])
    rot_full = int(md.get("gemma4.rope.dimension_count", hd_full))
    rot_swa = int(md.get("gemma4.rope.dimension_count_swa", hd_swa))
    kv = md.get("gemma4.attention.head_count_kv", n_head)
    kv = [int(x) for x in kv] if isinstance(kv, (list, tuple)) else [int(kv)] * n_layer
    if int(md.get("gemma4.embedding_length_per_layer_input", 0)):
        raise ValueError("gemma4: per-layer embeddings not supported by the reference")
    n_kv = n_layer - int(md.get("gemma4.attention.shared_kv_layers", 0))
    source = [i if i < n_kv else n_kv - (2 if pattern[i] else 1) for i in range(n_layer)]
    return dict(swa=pattern, layer_head_dim=[hd_swa if f else hd_full for f in pattern],
                layer_kv_heads=kv, layer_rot=[rot_swa if f else rot_full for f in pattern],
                kv_source=source,
                rope_base_swa=float(md.get("gemma4.rope.freq_base_swa", md.get("gemma4.rope.freq_base", 10000.0))),
                logit_softcap=float(md.get("gemma4.final_logit_softcapping", 0.0)),
                sliding_window=int(md["gemma4.attention.sliding_window"]))


def mla_head_sizes(r: GGUFReader, n_head: int):
    """deepseek2 head sizes -> (qk_head_dim, v_head_dim, n_head_kv as MHA).
    MLA-layout files carry the per-head sizes in key_length_mla / value_length_mla
    (their key_length / value_length / head_count_kv describe the absorbed
    latent cache: kv_lora + n_rot, kv_lora, 1); legacy files in key_length /
    value_length."""
    md = r.metadata
    k_mla = md.get("deepseek2.attention.key_length_mla")
    v_mla = md.get("deepseek2.attention.value_length_mla")
    if (k_mla is None) != (v_mla is None):
        raise ValueError("deepseek2: only one of attention.key_length_mla / value_length_mla present")
    if k_mla is not None:
        return int(k_mla), int(v_mla), n_head
    if "deepseek2.attention.key_length" not in md or "deepseek2.attention.value_length" not in md:
        raise KeyError("deepseek2: attention.key_length(_mla) / value_length(_mla) missing")
    return int(md["deepseek2.attention.key_length"]), int(md["deepseek2.attention.value_length"]), n_head


class Weights:
    """All tensors dequantised once (float64) and cast to the compute dtype."""

    def __init__(self, r: GGUFReader, dtype: torch.dtype, activations: str = "float"):
        if activations not in ACTIVATION_MODES:
            raise ValueError(f"activations must be one of {sorted(ACTIVATION_MODES)}, not {activations!r}")
        self.r = r
        self.dtype = dtype
        self.activations = activations
        self.cache: Dict[str, torch.Tensor] = {}

    def act(self, name: str) -> Optional[Callable[[torch.Tensor], torch.Tensor]]:
        """Rounding of the input rows of the matmul with tensor `name` (None = exact),
        by the weight's type and the activations mode (see ACTIVATION_MODES)."""
        if name not in self.r.tensors:                      # old per-expert layout
            name = name.replace("_exps.weight", ".0.weight")
        return ACTIVATION_MODES[self.activations].get(self.r.tensors[name].type)

    def has(self, name: str) -> bool:
        return name in self.r.tensors

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.cache:
            self.cache[name] = torch.from_numpy(self.r.tensor(name)).to(self.dtype)
        return self.cache[name]

    def get(self, name: str) -> Optional[torch.Tensor]:
        return self[name] if self.has(name) else None

    def experts(self, layer: int, which: str) -> torch.Tensor:
        """(n_expert, n_out, n_in) for which in gate/up/down; also accepts the
        old Mixtral layout of one 2-D tensor per expert."""
        fused = f"blk.{layer}.ffn_{which}_exps.weight"
        if self.has(fused):
            return self[fused]
        per = []
        e = 0
        while self.has(f"blk.{layer}.ffn_{which}.{e}.weight"):
            per.append(self[f"blk.{layer}.ffn_{which}.{e}.weight"])
            e += 1
        if not per:
            raise KeyError(f"no expert tensors for blk.{layer}.ffn_{which}")
        return torch.stack(per)


# ---- blocks -----------------------------------------------------------------

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight, over the last dim."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None,
           act: Optional[Callable] = None) -> torch.Tensor:
    """y = x W^T + b (torch.nn.Linear). act: rounding of the rows of x first (see Weights.act)."""
    if act is not None:
        x = act(x)
    y = x @ w.T
    return y + b if b is not None else y


def yarn_frequencies(n_rot: int, base: float, factor: float, orig_ctx: int,
                     beta_fast: float = 32.0, beta_slow: float = 1.0):
    """YaRN (Peng et al. 2023) as GGUF engines compute it: dimension pair i turns
    orig_ctx * freq_i / (2 pi) times over the original context; pairs turning more
    than beta_fast times keep freq_i, pairs turning fewer than beta_slow times use
    freq_i / factor, a linear ramp between (its ends floored / ceiled to whole pairs);
    cos and sin are scaled by 1 + 0.1 ln(factor). Returns (freqs (half,), mscale)."""
    half = n_rot // 2
    i = torch.arange(half, dtype=torch.float64)
    freq = base ** (-2.0 * i / n_rot)

    def pair_turning(beta):  # the pair index whose frequency turns `beta` times
        return n_rot * math.log(orig_ctx / (beta * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(pair_turning(beta_fast)))
    high = min(n_rot - 1.0, math.ceil(pair_turning(beta_slow)))
    keep = 1.0 - torch.clamp((i - low) / max(0.001, high - low), 0.0, 1.0)   # 1: original frequency
    return freq * keep + freq / factor * (1.0 - keep), 1.0 + 0.1 * math.log(factor)


def rope(x: torch.Tensor, positions: torch.Tensor, n_rot: int, base: float, style: str,
         yarn: Optional[tuple] = None, mscale: Optional[float] = None,
         factors: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x: (T, H, D). Rotates the first n_rot dims of each head; the rest pass through.
    theta_i = pos * base^(-2i/n_rot), i = 0..n_rot/2-1 (yarn: (factor, orig_ctx),
    see yarn_frequencies).  mscale: magnitude of cos/sin, when given (deepseek2);
    else YaRN's 1 + 0.1 ln(factor), 1 without YaRN."""
    T, H, D = x.shape
    half = n_rot // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / n_rot)                       # (half,)
    yarn_mscale = 1.0
    if yarn is not None:
        inv_freq, yarn_mscale = yarn_frequencies(n_rot, base, yarn[0], yarn[1])
    if factors is not None:  # ggml's freq_factors: pair i's angle divided by factors[i]
        inv_freq = inv_freq / factors.to(torch.float64)[:half]
    if mscale is None:
        mscale = yarn_mscale
    theta = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (T, half)
    cos = (torch.cos(theta) * mscale).to(x.dtype)[:, None, :]   # (T, 1, half)
    sin = (torch.sin(theta) * mscale).to(x.dtype)[:, None, :]
    rot, rest = x[..., :n_rot], x[..., n_rot:]
    if style == ROPE_NORM:
        x0, x1 = rot[..., 0::2], rot[..., 1::2]
        y0 = x0 * cos - x1 * sin
        y1 = x0 * sin + x1 * cos
        out = torch.stack([y0, y1], dim=-1).reshape(T, H, n_rot)
    elif style == ROPE_NEOX:
        x0, x1 = rot[..., :half], rot[..., half:]
        y0 = x0 * cos - x1 * sin
        y1 = x0 * sin + x1 * cos
        out = torch.cat([y0, y1], dim=-1)
    else:
        raise ValueError(style)
    return torch.cat([out, rest], dim=-1)


def attention(cfg: Config, W: Weights, L: int, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x: (T, n_embd), already normalised. Returns attn_output(...) (T, n_embd)."""
    T = x.shape[0]
    p = f"blk.{L}."
    n_q = cfg.n_head * cfg.head_dim
    n_kv = cfg.n_head_kv * cfg.head_dim
    if W.has(p + "attn_qkv.weight"):
        qkv = linear(x, W[p + "attn_qkv.weight"], W.get(p + "attn_qkv.bias"), W.act(p + "attn_qkv.weight"))
        q, k, v = qkv.split([n_q, n_kv, n_kv], dim=-1)
    else:
        q = linear(x, W[p + "attn_q.weight"], W.get(p + "attn_q.bias"), W.act(p + "attn_q.weight"))
        k = linear(x, W[p + "attn_k.weight"], W.get(p + "attn_k.bias"), W.act(p + "attn_k.weight"))
        v = linear(x, W[p + "attn_v.weight"], W.get(p + "attn_v.bias"), W.act(p + "attn_v.weight"))

    if cfg.qk_norm_kind == "whole":            # olmoe, minimax-m2: over the whole projection vector
        q = rms_norm(q, W[p + "attn_q_norm.weight"], cfg.eps)
        k = rms_norm(k, W[p + "attn_k_norm.weight"], cfg.eps)
    q = q.reshape(T, cfg.n_head, cfg.head_dim)
    k = k.reshape(T, cfg.n_head_kv, cfg.head_dim)
    v = v.reshape(T, cfg.n_head_kv, cfg.head_dim)
    per_head = cfg.qk_norm_kind == "per_head" or (
        cfg.qk_norm_kind == "per_head_if_present" and W.has(p + "attn_q_norm.weight"))
    if per_head:                               # qwen3moe, GLM-4.5: per head, weight of size head_dim
        q = rms_norm(q, W[p + "attn_q_norm.weight"], cfg.eps)
        k = rms_norm(k, W[p + "attn_k_norm.weight"], cfg.eps)

    yarn = (cfg.yarn_factor, cfg.yarn_orig_ctx) if cfg.yarn_factor > 1.0 else None
    q = rope(q, positions, cfg.n_rot, cfg.rope_base, cfg.rope_style, yarn)
    k = rope(k, positions, cfg.n_rot, cfg.rope_base, cfg.rope_style, yarn)

    group = cfg.n_head // cfg.n_head_kv        # query head h uses kv head h // group
    k = k.repeat_interleave(group, dim=1)      # (T, n_head, D)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(cfg.head_dim)   # (H, T, S)
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    if cfg.sliding_window > 0 and L % 2 == 0:  # gpt-oss: key s visible from t when t - s < window
        visible &= torch.ones(T, T, dtype=torch.bool).triu(-(cfg.sliding_window - 1))
    scores = scores.masked_fill(~visible, float("-inf"))
    sinks = W.get(p + "attn_sinks.weight")
    if sinks is not None:  # one more logit per head in the softmax, with no value
        sink_col = sinks.reshape(-1, 1, 1).expand(cfg.n_head, T, 1)
        probs = torch.softmax(torch.cat([scores, sink_col], dim=-1), dim=-1)[..., :T]
    else:
        probs = torch.softmax(scores, dim=-1)
    ctx = torch.einsum("hts,shd->thd", probs, v).reshape(T, n_q)
    return linear(ctx, W[p + "attn_output.weight"], W.get(p + "attn_output.bias"), W.act(p + "attn_output.weight"))


def mla_scales(cfg: Config):
    """deepseek2 -> (magnitude of the rope cos/sin, kq_scale).  With YaRN (f > 1)
    llama.cpp folds mscale^2 into kq_scale: mscale = 1 + L ln f for a stored
    yarn_log_multiplier L (the cos/sin then unscaled: HF's mscale / mscale_all_dim
    = 1), else mscale = 1 + 0.1 ln f, which the cos/sin keep as well."""
    base_scale = 1.0 / math.sqrt(cfg.head_dim)                  # over the whole q/k head, nope + rope
    if cfg.yarn_factor <= 1.0:
        return 1.0, base_scale
    ln_f = math.log(cfg.yarn_factor)
    if cfg.yarn_log_mul != 0.0:
        m = 1.0 + cfg.yarn_log_mul * ln_f
        return 1.0, m * m * base_scale
    m = 1.0 + 0.1 * ln_f
    return m, m * m * base_scale


def mla_up_projections(cfg: Config, W: Weights, L: int):
    """Per-head latent -> key/value matrices of layer L: W_UK (n_head, qk_nope, kv_lora),
    W_UV (n_head, v_head_dim, kv_lora), so that k_nope_h = W_UK[h] c, v_h = W_UV[h] c.
    MLA layout: attn_k_b (n_head, kv_lora, qk_nope) holds W_UK[h] transposed (the
    engine's absorbed query is attn_k_b[h] q_nope), attn_v_b is W_UV as is.
    Legacy: attn_kv_b = HF kv_b_proj, per head qk_nope rows of W_UK then v rows of W_UV."""
    p = f"blk.{L}."
    H, r, v = cfg.n_head, cfg.kv_lora_rank, cfg.v_head_dim
    nope = cfg.head_dim - cfg.n_rot
    if W.has(p + "attn_k_b.weight"):
        k_b, v_b = W[p + "attn_k_b.weight"], W[p + "attn_v_b.weight"]
        if tuple(k_b.shape) != (H, r, nope) or tuple(v_b.shape) != (H, v, r):
            raise ValueError(f"{p}attn_k_b/attn_v_b: shapes {tuple(k_b.shape)}, {tuple(v_b.shape)}, "
                             f"want {(H, r, nope)}, {(H, v, r)}")
        return k_b.transpose(1, 2), v_b
    kv_b = W[p + "attn_kv_b.weight"]
    if tuple(kv_b.shape) != (H * (nope + v), r):
        raise ValueError(f"{p}attn_kv_b: shape {tuple(kv_b.shape)}, want {(H * (nope + v), r)}")
    kv_b = kv_b.reshape(H, nope + v, r)
    return kv_b[:, :nope, :], kv_b[:, nope:, :]


def mla_attention(cfg: Config, W: Weights, L: int, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """deepseek2 multi-head latent attention, the plain (non-absorbed) way.
    x: (T, n_embd), already normalised. Returns attn_output(...) (T, n_embd)."""
    T = x.shape[0]
    p = f"blk.{L}."
    H, d_qk, d_v, n_rot, r = cfg.n_head, cfg.head_dim, cfg.v_head_dim, cfg.n_rot, cfg.kv_lora_rank
    nope = d_qk - n_rot
    if W.has(p + "attn_q_a.weight"):           # compressed query: q_b(rmsnorm(q_a x))
        cq = linear(x, W[p + "attn_q_a.weight"], act=W.act(p + "attn_q_a.weight"))           # (T, q_lora)
        cq = rms_norm(cq, W[p + "attn_q_a_norm.weight"], cfg.eps)
        q = linear(cq, W[p + "attn_q_b.weight"], act=W.act(p + "attn_q_b.weight"))
    else:
        q = linear(x, W[p + "attn_q.weight"], act=W.act(p + "attn_q.weight"))
    q = q.reshape(T, H, d_qk)
    q_nope, q_pe = q[..., :nope], q[..., nope:]                 # (T, H, nope), (T, H, n_rot)

    kv = linear(x, W[p + "attn_kv_a_mqa.weight"], act=W.act(p + "attn_kv_a_mqa.weight"))  # (T, r + n_rot)
    c = rms_norm(kv[:, :r], W[p + "attn_kv_a_norm.weight"], cfg.eps)   # latent, normed
    k_pe = kv[:, None, r:]                                     # (T, 1, n_rot): one head, not normed

    mscale, kq_scale = mla_scales(cfg)
    yarn = (cfg.yarn_factor, cfg.yarn_orig_ctx) if cfg.yarn_factor > 1.0 else None
    q_pe = rope(q_pe, positions, n_rot, cfg.rope_base, cfg.rope_style, yarn, mscale)
    k_pe = rope(k_pe, positions, n_rot, cfg.rope_base, cfg.rope_style, yarn, mscale)[:, 0]   # (S, n_rot)

    # Up-projections of the latent: exact float inputs in every activations mode
    # (engines run these per-head products from dequantised weights).
    w_uk, w_uv = mla_up_projections(cfg, W, L)
    k_nope = torch.einsum("hdr,sr->shd", w_uk, c)              # (S, H, nope)
    v = torch.einsum("hdr,sr->shd", w_uv, c)                   # (S, H, d_v)

    scores = (torch.einsum("thd,shd->hts", q_nope, k_nope)
              + torch.einsum("thd,sd->hts", q_pe, k_pe)) * kq_scale                         # (H, T, S)
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    ctx = torch.einsum("hts,shd->thd", probs, v).reshape(T, H * d_v)
    return linear(ctx, W[p + "attn_output.weight"], act=W.act(p + "attn_output.weight"))


def imrope_positions(sections: List[int], n_rot: int) -> List[int]:
    """Which of the four position streams each rotated pair reads under IMROPE (ggml's
    GGML_ROPE_TYPE_IMROPE: pair i has sector s = i mod sum(sections); s % 3 == 1 and
    s < 3*sections[1] -> stream 1, s % 3 == 2 and s < 3*sections[2] -> 2, s % 3 == 0
    and s < 3*sections[0] -> 0, else 3)."""
    sec = (list(sections) + [0, 0, 0, 0])[:4]
    total = sum(sec)
    out = []
    for i in range(n_rot // 2):
        s = i % total
        if s % 3 == 1 and s < 3 * sec[1]:
            out.append(1)
        elif s % 3 == 2 and s < 3 * sec[2]:
            out.append(2)
        elif s % 3 == 0 and s < 3 * sec[0]:
            out.append(0)
        else:
            out.append(3)
    return out


def rope_imrope_text(x: torch.Tensor, positions: torch.Tensor, n_rot: int, base: float,
                     sections: List[int]) -> torch.Tensor:
    """IMROPE for text tokens, written out: streams 0-2 carry the token's position,
    stream 3 carries 0 (llama.cpp's text positions); pairs (x[i], x[i + n_rot/2])."""
    T, H, D = x.shape
    half = n_rot // 2
    stream = torch.tensor(imrope_positions(sections, n_rot))
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / n_rot)
    pos = positions.to(torch.float64)[:, None].expand(T, half)
    pos = torch.where(stream[None, :] == 3, torch.zeros_like(pos), pos)
    theta = pos * inv_freq[None, :]
    cos = torch.cos(theta).to(x.dtype)[:, None, :]
    sin = torch.sin(theta).to(x.dtype)[:, None, :]
    x0, x1 = x[..., :half], x[..., half:n_rot]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos, x[..., n_rot:]], dim=-1)


def gated_attention(cfg: Config, W: Weights, L: int, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """qwen35moe full attention: attn_q gives per head [q (head_dim); gate (head_dim)];
    q, k RMS-normed per head, IMROPE, causal GQA softmax attention, each head's output
    times sigmoid(gate), then attn_output.  x: (T, n_embd) normalised."""
    T = x.shape[0]
    p = f"blk.{L}."
    H, Hkv, hd = cfg.n_head, cfg.n_head_kv, cfg.head_dim
    qg = linear(x, W[p + "attn_q.weight"], act=W.act(p + "attn_q.weight")).reshape(T, H, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:]
    k = linear(x, W[p + "attn_k.weight"], act=W.act(p + "attn_k.weight")).reshape(T, Hkv, hd)
    v = linear(x, W[p + "attn_v.weight"], act=W.act(p + "attn_v.weight")).reshape(T, Hkv, hd)
    q = rms_norm(q, W[p + "attn_q_norm.weight"], cfg.eps)
    k = rms_norm(k, W[p + "attn_k_norm.weight"], cfg.eps)
    q = rope_imrope_text(q, positions, cfg.n_rot, cfg.rope_base, cfg.rope_sections)
    k = rope_imrope_text(k, positions, cfg.n_rot, cfg.rope_base, cfg.rope_sections)
    group = H // Hkv
    k = k.repeat_interleave(group, dim=1)                      # query head h reads kv head h // group
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    ctx = torch.einsum("hts,shd->thd", probs, v) * torch.sigmoid(gate)
    return linear(ctx.reshape(T, H * hd), W[p + "attn_output.weight"], act=W.act(p + "attn_output.weight"))


def delta_net(cfg: Config, W: Weights, L: int, x: torch.Tensor) -> torch.Tensor:
    """qwen35moe gated delta-net layer, the plain per-token recurrence from a zero state.
    x: (T, n_embd) normalised. attn_qkv -> causal depthwise conv (ssm_conv1d, width K,
    zero history) -> SiLU -> [q | k | v]; q, k L2-normalised per head (/ max(|x|, eps)),
    q / sqrt(head); value head h reads key head h mod n_k (the converter stores value
    heads tiled); g = softplus(ssm_alpha x + ssm_dt.bias) * ssm_a, beta = sigmoid(ssm_beta x);
    S = exp(g) S; S += beta (v - S k) k^T; o = S q; o RMS-normed per head (ssm_norm) times
    silu(attn_gate x); ssm_out."""
    T = x.shape[0]
    p = f"blk.{L}."
    K, hk, nk, nv = cfg.ssm_conv_kernel, cfg.ssm_head, cfg.ssm_k_heads, cfg.ssm_v_heads
    key, value = nk * hk, nv * hk
    qkv = linear(x, W[p + "attn_qkv.weight"], act=W.act(p + "attn_qkv.weight"))            # (T, C)
    z = linear(x, W[p + "attn_gate.weight"], act=W.act(p + "attn_gate.weight"))            # (T, value)
    a_logit = linear(x, W[p + "ssm_alpha.weight"], act=W.act(p + "ssm_alpha.weight"))      # (T, nv)
    b_logit = linear(x, W[p + "ssm_beta.weight"], act=W.act(p + "ssm_beta.weight"))
    conv_w = W[p + "ssm_conv1d.weight"]                                                     # (C, K)
    padded = torch.cat([torch.zeros(K - 1, qkv.shape[1], dtype=qkv.dtype), qkv], dim=0)
    conv = torch.stack([(padded[t:t + K].T * conv_w).sum(dim=1) for t in range(T)])        # (T, C)
    xs = torch.nn.functional.silu(conv)
    q = xs[:, :key].reshape(T, nk, hk)
    k = xs[:, key:2 * key].reshape(T, nk, hk)
    v = xs[:, 2 * key:].reshape(T, nv, hk)
    q = q / torch.clamp(q.norm(dim=-1, keepdim=True), min=cfg.eps) / math.sqrt(hk)
    k = k / torch.clamp(k.norm(dim=-1, keepdim=True), min=cfg.eps)
    g = torch.nn.functional.softplus(a_logit + W[p + "ssm_dt.bias"]) * W[p + "ssm_a"]      # (T, nv)
    beta = torch.sigmoid(b_logit)
    S = torch.zeros(nv, hk, hk, dtype=x.dtype)                  # S[h][value dim][key dim]
    out = torch.zeros(T, nv, hk, dtype=x.dtype)
    for t in range(T):
        for h in range(nv):
            kh = h % nk
            S[h] = S[h] * torch.exp(g[t, h])
            err = v[t, h] - S[h] @ k[t, kh]
            S[h] = S[h] + beta[t, h] * torch.outer(err, k[t, kh])
            out[t, h] = S[h] @ q[t, kh]
    out = rms_norm(out, W[p + "ssm_norm.weight"], cfg.eps) * torch.nn.functional.silu(z.reshape(T, nv, hk))
    return linear(out.reshape(T, value), W[p + "ssm_out.weight"], act=W.act(p + "ssm_out.weight"))


def swiglu_ffn(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor,
               acts=(None, None, None), biases=(None, None, None), clamped: bool = False) -> torch.Tensor:
    """down(silu(gate x) * up x).  acts: activation rounding per matmul (gate, up, down).
    clamped (gpt-oss): g = min(gate x, 7), u = clamp(up x, -7, 7), g sigmoid(1.702 g) (u + 1)."""
    g = linear(x, gate, biases[0], act=acts[0])
    u = linear(x, up, biases[1], act=acts[1])
    if clamped:
        g = torch.clamp(g, max=7.0)
        h = g * torch.sigmoid(1.702 * g) * (torch.clamp(u, -7.0, 7.0) + 1.0)
    else:
        h = torch.nn.functional.silu(g) * u
    return linear(h, down, biases[2], act=acts[2])


def ffn_acts(W: "Weights", prefix: str, suffix: str):
    return tuple(W.act(f"{prefix}ffn_{w}{suffix}") for w in ("gate", "up", "down"))


def topk_lowest_index_ties(p: torch.Tensor, k: int) -> List[int]:
    """Indices of the k largest entries of a 1-D tensor; ties go to the lower index."""
    vals = p.tolist()
    return sorted(range(len(vals)), key=lambda e: (-vals[e], e))[:k]


def limit_to_groups(scores: torch.Tensor, n_groups: int, n_used: int):
    """Group-limited choice (llama.cpp build_moe_ffn, DeepSeek-V3's noaux_tc): the
    experts, in n_groups consecutive groups, score a group by the sum of its two
    largest scores; the n_used best groups stay (ties: lower group), the other
    experts get -inf.  scores: (n_expert,). Returns (masked scores, the kept
    groups, margin = score of the last kept group - best dropped group)."""
    groups = scores.reshape(n_groups, -1)                                  # (n_groups, n_expert / n_groups)
    group_score = torch.topk(groups, min(2, groups.shape[1]), dim=1).values.sum(dim=1)
    kept = topk_lowest_index_ties(group_score, n_used)
    dropped = [g for g in range(n_groups) if g not in kept]
    masked = torch.full_like(groups, float("-inf"))
    masked[kept] = groups[kept]
    margin = group_score[kept[-1]].item() - max(group_score[g].item() for g in dropped)
    return masked.reshape(-1), sorted(kept), margin


def groups_limit_routing(cfg: Config) -> bool:
    return cfg.n_expert_groups > 1 and 0 < cfg.n_group_used < cfg.n_expert_groups


@dataclass
class RoutingInfo:
    experts: List[List[int]]      # per token, selected experts
    weights: List[List[float]]
    margin: List[float]           # per token: prob of k-th selected minus prob of best unselected
                                  # (group-limited: also the kept/dropped group score gap)
    probs: Optional[np.ndarray] = None   # (T, n_expert) router softmax, float64 copy
    groups: List[List[int]] = field(default_factory=list)   # per token, kept groups (group-limited only)


def moe_ffn(cfg: Config, W: Weights, L: int, x: torch.Tensor):
    """x: (T, n_embd) normalised. Returns (out, RoutingInfo)."""
    p = f"blk.{L}."
    router_logits = linear(x, W[p + "ffn_gate_inp.weight"], W.get(p + "ffn_gate_inp.bias"),
                           act=W.act(p + "ffn_gate_inp.weight"))      # (T, n_expert)
    if cfg.sigmoid_gating:
        router_probs = torch.sigmoid(router_logits)
    else:
        router_probs = torch.softmax(router_logits, dim=-1)
    # glm4moe: the experts are chosen by probability + exp_probs_b, weighted by probability.
    bias = W[p + "exp_probs_b.bias"] if cfg.arch == "minimax-m2" else W.get(p + "exp_probs_b.bias")
    choice = router_probs + bias if bias is not None else router_probs
    gate_e = W.experts(L, "gate")
    up_e = W.experts(L, "up")
    down_e = W.experts(L, "down")
    exp_acts = ffn_acts(W, p, "_exps.weight")
    gpt_oss = cfg.arch == "gpt-oss"
    exp_bias = [W.get(f"{p}ffn_{w}_exps.bias") for w in ("gate", "up", "down")]  # (n_expert, width)

    out = torch.zeros_like(x)
    info = RoutingInfo([], [], [], router_probs.to(torch.float64).numpy())
    for t in range(x.shape[0]):
        cand, group_margin = choice[t], math.inf      # the scores the top-k picks from
        if groups_limit_routing(cfg):
            cand, kept, group_margin = limit_to_groups(choice[t], cfg.n_expert_groups, cfg.n_group_used)
            info.groups.append(kept)
        if gpt_oss:  # the k largest logits, then a softmax over those k alone
            sel = topk_lowest_index_ties(router_logits[t], cfg.n_expert_used)
            w = torch.softmax(router_logits[t, sel], dim=-1)
        else:
            sel = topk_lowest_index_ties(cand, cfg.n_expert_used)
            w = router_probs[t, sel]
            if cfg.renorm_topk:
                w = w / w.sum()
        w = w * cfg.expert_weights_scale
        for e, we in zip(sel, w):
            bias_e = tuple(b[e] if b is not None else None for b in exp_bias)
            out[t] += we * swiglu_ffn(x[t], gate_e[e], up_e[e], down_e[e], exp_acts, bias_e, clamped=gpt_oss)
        rest = [cand[e].item() for e in range(cfg.n_expert) if e not in sel and cand[e] > float("-inf")]
        info.experts.append(sel)
        info.weights.append(w.tolist())
        info.margin.append(min(cand[sel[-1]].item() - (max(rest) if rest else 0.0), group_margin))

    if cfg.shared_kind is not None and W.has(p + "ffn_gate_shexp.weight"):
        shared = swiglu_ffn(x, W[p + "ffn_gate_shexp.weight"], W[p + "ffn_up_shexp.weight"],
                            W[p + "ffn_down_shexp.weight"], ffn_acts(W, p, "_shexp.weight"))
        if cfg.shared_kind == "sigmoid":           # qwen2moe
            gate_w = W[p + "ffn_gate_inp_shexp.weight"].reshape(1, -1)                # (1, n_embd)
            g = torch.sigmoid(linear(x, gate_w, act=W.act(p + "ffn_gate_inp_shexp.weight")))[..., 0]
            shared = shared * g[:, None]
        out = out + shared
    return out, info


def dense_ffn(W: Weights, L: int, x: torch.Tensor) -> torch.Tensor:
    p = f"blk.{L}."
    return swiglu_ffn(x, W[p + "ffn_gate.weight"], W[p + "ffn_up.weight"], W[p + "ffn_down.weight"],
                      ffn_acts(W, p, ".weight"))


def transformer_block(cfg: Config, W: Weights, L: int, h: torch.Tensor, positions: torch.Tensor):
    p = f"blk.{L}."
    attn_in = rms_norm(h, W[p + "attn_norm.weight"], cfg.eps)
    if cfg.arch == "qwen35moe":
        if cfg.recurrent[L]:
            h = h + delta_net(cfg, W, L, attn_in)
        else:
            h = h + gated_attention(cfg, W, L, attn_in, positions)
    else:
        attend = mla_attention if cfg.arch == "deepseek2" else attention
        h = h + attend(cfg, W, L, attn_in, positions)
    norm_name = ("post_attention_norm.weight" if cfg.arch in ("glm4moe", "gpt-oss", "qwen35moe")
                 else "ffn_norm.weight")
    ffn_in = rms_norm(h, W[p + norm_name], cfg.eps)
    is_dense = cfg.arch in ("deepseek", "deepseek2", "glm4moe") and L < cfg.n_leading_dense
    if is_dense or not W.has(p + "ffn_gate_inp.weight"):
        ffn_out, info = dense_ffn(W, L, ffn_in), None
    else:
        ffn_out, info = moe_ffn(cfg, W, L, ffn_in)
    return h + ffn_out, info


# ---- gemma4 -------------------------------------------------------------------
# Gemma 4 MoE as llama.cpp computes it (src/models/gemma4.cpp; the converter's
# conversion/gemma.py Gemma4Model for what the stored tensors mean):
#   h   = x + post_attention_norm(attn(attn_norm(x)))
#   mlp = post_ffw_norm_1(geglu MLP(ffn_norm(h)))
#   moe = post_ffw_norm_2(sum_k w_k s_e * geglu expert_e(pre_ffw_norm_2(h)))
#         router logits = ffn_gate_inp . (rms(h) / sqrt(n_embd) * ffn_gate_inp.scale),
#         w = softmax over all experts, top-k, renormalised; s_e = ffn_down_exps.scale[e]
#   x'  = (h + post_ffw_norm(mlp + moe)) * layer_output_scale
# Norms multiply by the stored weight (no +1); the embedding is scaled by sqrt(n_embd);
# q, k RMS-normed per head with weights, v without; q.k unscaled; global layers' rope
# divides pair i's angle by rope_freqs[i]; the logits soft-capped: cap tanh(l / cap).

def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def geglu_ffn(x, gate, up, down, acts=(None, None, None)):
    g = linear(x, gate, act=acts[0])
    u = linear(x, up, act=acts[1])
    return linear(gelu_tanh(g) * u, down, act=acts[2])


def plain_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


def gemma4_attention(cfg: Config, W: Weights, L: int, x: torch.Tensor, positions: torch.Tensor, kv: dict):
    T = x.shape[0]
    p = f"blk.{L}."
    hd, nkv, rot = cfg.layer_head_dim[L], cfg.layer_kv_heads[L], cfg.layer_rot[L]
    sliding = cfg.swa[L]
    base = cfg.rope_base_swa if sliding else cfg.rope_base
    factors = W.get("rope_freqs.weight") if not sliding else None
    q = linear(x, W[p + "attn_q.weight"], act=W.act(p + "attn_q.weight")).reshape(T, cfg.n_head, hd)
    q = rope(rms_norm(q, W[p + "attn_q_norm.weight"], cfg.eps), positions, rot, base, ROPE_NEOX, factors=factors)
    if cfg.kv_source[L] == L:
        kp = linear(x, W[p + "attn_k.weight"], act=W.act(p + "attn_k.weight"))
        vp = linear(x, W[p + "attn_v.weight"], act=W.act(p + "attn_v.weight")) if W.has(p + "attn_v.weight") else kp
        k = rms_norm(kp.reshape(T, nkv, hd), W[p + "attn_k_norm.weight"], cfg.eps)
        k = rope(k, positions, rot, base, ROPE_NEOX, factors=factors)
        v = plain_rms(vp.reshape(T, nkv, hd), cfg.eps)
        kv[L] = (k, v)
    k, v = kv[cfg.kv_source[L]]
    group = cfg.n_head // nkv
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k)                 # no 1/sqrt(hd): Gemma 4 scales by 1
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    if sliding:                                                 # key s visible from t when t - s < window
        visible &= torch.ones(T, T, dtype=torch.bool).triu(-(cfg.sliding_window - 1))
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    ctx = torch.einsum("hts,shd->thd", probs, v).reshape(T, cfg.n_head * hd)
    return linear(ctx, W[p + "attn_output.weight"], act=W.act(p + "attn_output.weight"))


def gemma4_experts(W: Weights, L: int):
    """(gate, up, down) stacked per expert: (n_expert, n_ff, n_embd) x2, (n_expert, n_embd, n_ff).
    ffn_gate_up_exps holds each expert's gate rows, then its up rows."""
    p = f"blk.{L}."
    if W.has(p + "ffn_gate_up_exps.weight"):
        gu = W[p + "ffn_gate_up_exps.weight"]
        f = gu.shape[1] // 2
        act = W.act(p + "ffn_gate_up_exps.weight")
        return gu[:, :f, :], gu[:, f:, :], W[p + "ffn_down_exps.weight"], (act, act, W.act(p + "ffn_down_exps.weight"))
    return (W[p + "ffn_gate_exps.weight"], W[p + "ffn_up_exps.weight"], W[p + "ffn_down_exps.weight"],
            ffn_acts(W, p, "_exps.weight"))


def gemma4_block(cfg: Config, W: Weights, L: int, h: torch.Tensor, positions: torch.Tensor, kv: dict):
    p = f"blk.{L}."
    a = gemma4_attention(cfg, W, L, rms_norm(h, W[p + "attn_norm.weight"], cfg.eps), positions, kv)
    h = h + rms_norm(a, W[p + "post_attention_norm.weight"], cfg.eps)
    mlp = geglu_ffn(rms_norm(h, W[p + "ffn_norm.weight"], cfg.eps), W[p + "ffn_gate.weight"],
                    W[p + "ffn_up.weight"], W[p + "ffn_down.weight"], ffn_acts(W, p, ".weight"))
    mlp = rms_norm(mlp, W[p + "post_ffw_norm_1.weight"], cfg.eps)
    router_in = plain_rms(h, cfg.eps) / math.sqrt(cfg.n_embd) * W[p + "ffn_gate_inp.scale"]
    logits = linear(router_in, W[p + "ffn_gate_inp.weight"], act=W.act(p + "ffn_gate_inp.weight"))
    probs = torch.softmax(logits, dim=-1)
    out_scale = W[p + "ffn_down_exps.scale"]
    gate_e, up_e, down_e, acts = gemma4_experts(W, L)
    x2 = rms_norm(h, W[p + "pre_ffw_norm_2.weight"], cfg.eps)
    moe = torch.zeros_like(h)
    info = RoutingInfo([], [], [], probs.to(torch.float64).numpy())
    for t in range(h.shape[0]):
        sel = topk_lowest_index_ties(probs[t], cfg.n_expert_used)
        w = probs[t, sel]
        w = w / w.sum()
        for e, we in zip(sel, w):
            moe[t] += we * out_scale[e] * geglu_ffn(x2[t], gate_e[e], up_e[e], down_e[e], acts)
        rest = [probs[t, e].item() for e in range(cfg.n_expert) if e not in sel]
        info.experts.append(sel)
        info.weights.append(w.tolist())
        info.margin.append(probs[t, sel[-1]].item() - max(rest))
    moe = rms_norm(moe, W[p + "post_ffw_norm_2.weight"], cfg.eps)
    h = h + rms_norm(mlp + moe, W[p + "post_ffw_norm.weight"], cfg.eps)
    if W.has(p + "layer_output_scale.weight"):
        h = h * W[p + "layer_output_scale.weight"]
    return h, info


class MoEReference:
    def __init__(self, path: str, dtype: torch.dtype = torch.float64, activations: str = "float"):
        self.reader = GGUFReader(path)
        self.cfg = config_from_gguf(self.reader)
        self.W = Weights(self.reader, dtype, activations)
        self.dtype = dtype

    def forward(self, tokens: List[int], dump_hidden: bool = False):
        """Returns dict: logits (T, n_vocab) [float64 numpy], hidden (list of
        (T, n_embd) per layer input + final, if dump_hidden), routing (per MoE layer)."""
        cfg, W = self.cfg, self.W
        ids = torch.tensor(tokens, dtype=torch.long)
        if ids.min() < 0 or ids.max() >= cfg.n_vocab:
            raise ValueError("token id out of range")
        positions = torch.arange(len(tokens))
        h = W["token_embd.weight"][ids]                             # (T, n_embd)
        if cfg.arch == "gemma4":                                    # Gemma's embedding scale
            h = h * math.sqrt(cfg.n_embd)
        hidden = [h.clone()] if dump_hidden else []
        routing = {}
        kv = {}                                                     # gemma4: each layer's (k, v)
        for L in range(cfg.n_layer):
            if cfg.arch == "gemma4":
                h, info = gemma4_block(cfg, W, L, h, positions, kv)
            else:
                h, info = transformer_block(cfg, W, L, h, positions)
            if info is not None:
                routing[L] = info
            if dump_hidden:
                hidden.append(h.clone())
        h = rms_norm(h, W["output_norm.weight"], cfg.eps)
        out_name = "output.weight" if W.has("output.weight") else "token_embd.weight"
        logits = linear(h, W[out_name], act=W.act(out_name))
        if cfg.logit_softcap > 0:
            logits = cfg.logit_softcap * torch.tanh(logits / cfg.logit_softcap)
        return {
            "logits": logits.to(torch.float64).numpy(),
            "hidden": [x.to(torch.float64).numpy() for x in hidden],
            "routing": routing,
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, nargs="+", required=True)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--dump-hidden", metavar="NPZ", help="write per-layer hidden states (+logits) to NPZ")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--activations", choices=sorted(ACTIVATION_MODES), default="q8",
                    help="q8 (default, as moechat's CPU engine and the goldens): inputs of matmuls with "
                         "Q8_0/Q4_0/K-quant weights quantised to Q8_0/Q8_K blocks; float: exact inputs; "
                         "ggml: q8 plus f16/bf16 inputs for F16/BF16 weights")
    a = ap.parse_args()
    ref = MoEReference(a.model, torch.float64 if a.dtype == "float64" else torch.float32, a.activations)
    for w in ref.cfg.warnings:
        print("warning:", w, file=sys.stderr)
    res = ref.forward(a.tokens, dump_hidden=bool(a.dump_hidden))
    for t, row in enumerate(res["logits"]):
        top = np.argsort(-row, kind="stable")[:a.top]
        print(f"pos {t} tok {a.tokens[t]}: " + " ".join(f"{i}:{row[i]:.6g}" for i in top))
    for L, info in res["routing"].items():
        print(f"layer {L} experts {info.experts} min-margin {min(info.margin):.3g}")
    if a.dump_hidden:
        arrs = {f"hidden_{i}": x for i, x in enumerate(res["hidden"])}
        arrs["logits"] = res["logits"]
        np.savez(a.dump_hidden, **arrs)
        print("wrote", a.dump_hidden, "(hidden_0 = embeddings, hidden_{L+1} = after layer L)")


if __name__ == "__main__":
    main()
