#!/usr/bin/env python3
"""Independent GGUF v3 reader (numpy only), written from the public GGUF spec
(/work/shared/GGUF-NOTES.md), not from moechat's C++ engine.

    r = GGUFReader("model.gguf")
    r.metadata["general.architecture"]   -> "qwen3moe"
    r.tensors["blk.0.attn_q.weight"]     -> TensorInfo(name, ne, type, offset)
    r.tensor("blk.0.attn_q.weight")      -> float64 numpy array

Shapes: GGUF lists dims in ne order (ne0 = contiguous). The numpy array has the
dims reversed (C order), so a matrix {n_in, n_out} becomes (n_out, n_in) = a
torch.nn.Linear weight, and a 3-D expert tensor {n_in, n_out, n_expert}
becomes (n_expert, n_out, n_in).

Dequantisation is exact: every stored value is converted to float64 without
any intermediate float32 rounding beyond what the format itself defines
(an f16 scale times an int8 code is computed in float64).
"""

from __future__ import annotations

import os
import re
import struct
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO, Dict, List, Tuple

import numpy as np

GGUF_MAGIC = 0x46554747  # b"GGUF" read as little-endian u32
DEFAULT_ALIGNMENT = 32

# metadata value types
VT_U8, VT_I8, VT_U16, VT_I16, VT_U32, VT_I32, VT_F32, VT_BOOL = 0, 1, 2, 3, 4, 5, 6, 7
VT_STRING, VT_ARRAY, VT_U64, VT_I64, VT_F64 = 8, 9, 10, 11, 12

_SCALAR_FMT = {
    VT_U8: "<B", VT_I8: "<b", VT_U16: "<H", VT_I16: "<h",
    VT_U32: "<I", VT_I32: "<i", VT_F32: "<f", VT_BOOL: "<?",
    VT_U64: "<Q", VT_I64: "<q", VT_F64: "<d",
}
_SCALAR_NP = {
    VT_U8: "<u1", VT_I8: "<i1", VT_U16: "<u2", VT_I16: "<i2",
    VT_U32: "<u4", VT_I32: "<i4", VT_F32: "<f4", VT_BOOL: "<u1",
    VT_U64: "<u8", VT_I64: "<i8", VT_F64: "<f8",
}

# tensor types: id -> (name, elements per block, bytes per block)
T_F32, T_F16, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_Q8_0 = 0, 1, 2, 3, 6, 7, 8
T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K, T_BF16 = 10, 11, 12, 13, 14, 30
T_IQ2_XXS, T_IQ2_XS, T_IQ3_XXS, T_IQ1_S, T_IQ4_NL, T_IQ3_S, T_IQ2_S, T_IQ4_XS = 16, 17, 18, 19, 20, 21, 22, 23
T_IQ1_M, T_MXFP4 = 29, 39
TENSOR_TYPES = {
    T_F32: ("F32", 1, 4),
    T_F16: ("F16", 1, 2),
    T_Q4_0: ("Q4_0", 32, 18),
    T_Q4_1: ("Q4_1", 32, 20),
    T_Q5_0: ("Q5_0", 32, 22),
    T_Q5_1: ("Q5_1", 32, 24),
    T_Q8_0: ("Q8_0", 32, 34),
    T_IQ4_NL: ("IQ4_NL", 32, 18),
    T_Q2_K: ("Q2_K", 256, 84),
    T_Q3_K: ("Q3_K", 256, 110),
    T_Q4_K: ("Q4_K", 256, 144),
    T_Q5_K: ("Q5_K", 256, 176),
    T_Q6_K: ("Q6_K", 256, 210),
    T_BF16: ("BF16", 1, 2),
    T_MXFP4: ("MXFP4", 32, 17),
    T_IQ4_XS: ("IQ4_XS", 256, 136),
    T_IQ2_XXS: ("IQ2_XXS", 256, 66),
    T_IQ2_XS: ("IQ2_XS", 256, 74),
    T_IQ2_S: ("IQ2_S", 256, 82),
    T_IQ3_XXS: ("IQ3_XXS", 256, 98),
    T_IQ3_S: ("IQ3_S", 256, 110),
    T_IQ1_S: ("IQ1_S", 256, 50),
    T_IQ1_M: ("IQ1_M", 256, 56),
}
GRID_TYPES = (T_IQ2_XXS, T_IQ2_XS, T_IQ2_S, T_IQ3_XXS, T_IQ3_S, T_IQ1_S, T_IQ1_M)

# IQ4_NL's sixteen values (ggml-common.h kvalues_iq4nl), which IQ4_XS's nibbles index.
_IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float64)

# MXFP4 (OCP Microscaling Formats v1.0): per 32 elements one E8M0 exponent byte e
# (scale 2^(e-127)) and 16 bytes of E2M1 codes, element j in the low nibble of byte
# j and element j+16 in the high nibble (ggml's block_mxfp4). E2M1: sign bit 3,
# exponent bits 1-2, mantissa bit 0, values 0, 0.5, 1, 1.5, 2, 3, 4, 6.
_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


class GGUFError(Exception):
    pass


@dataclass
class TensorInfo:
    name: str
    ne: Tuple[int, ...]      # GGUF order, ne0 first (contiguous)
    type: int
    offset: int              # relative to the start of the data section

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES.get(self.type, (f"type{self.type}",))[0]

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        if self.type not in TENSOR_TYPES:
            raise GGUFError(f"{self.name}: unsupported tensor type {self.type}")
        _, blk, bpb = TENSOR_TYPES[self.type]
        if self.ne[0] % blk != 0:
            raise GGUFError(f"{self.name}: ne0={self.ne[0]} not a multiple of block size {blk}")
        return self.n_elements // blk * bpb

    @property
    def np_shape(self) -> Tuple[int, ...]:
        return tuple(reversed(self.ne))


class _Cursor:
    """Little-endian reader over a bytes buffer with position tracking."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise GGUFError(f"truncated file: need {n} bytes at offset {self.pos}, size {len(self.buf)}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, vt: int):
        fmt = _SCALAR_FMT[vt]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def u32(self) -> int:
        return self.scalar(VT_U32)

    def u64(self) -> int:
        return self.scalar(VT_U64)

    def string(self) -> str:
        n = self.u64()
        return self.take(n).decode("utf-8")

    def value(self, vt: int) -> Any:
        if vt in _SCALAR_FMT:
            v = self.scalar(vt)
            return bool(v) if vt == VT_BOOL else v
        if vt == VT_STRING:
            return self.string()
        if vt == VT_ARRAY:
            et = self.u32()
            n = self.u64()
            if et in _SCALAR_NP:  # fast path for numeric arrays; kept as python list
                arr = np.frombuffer(self.take(n * np.dtype(_SCALAR_NP[et]).itemsize), dtype=_SCALAR_NP[et])
                if et == VT_BOOL:
                    return [bool(x) for x in arr]
                return arr.tolist()
            if et in (VT_STRING, VT_ARRAY):
                return [self.value(et) for _ in range(n)]
            raise GGUFError(f"unknown array element type {et} at offset {self.pos}")
        raise GGUFError(f"unknown metadata value type {vt} at offset {self.pos}")


class GGUFReader:
    def __init__(self, path_or_bytes):
        if isinstance(path_or_bytes, (bytes, bytearray)):
            self.path = None
            self.buf = bytes(path_or_bytes)
        else:
            self.path = str(path_or_bytes)
            with open(self.path, "rb") as f:
                self.buf = f.read()
        c = _Cursor(self.buf)
        magic = c.u32()
        if magic != GGUF_MAGIC:
            raise GGUFError(f"bad magic 0x{magic:08x}")
        self.version = c.u32()
        if self.version != 3:
            raise GGUFError(f"unsupported GGUF version {self.version} (want 3)")
        n_tensors = c.u64()
        n_kv = c.u64()

        self.metadata: Dict[str, Any] = {}
        self.metadata_types: Dict[str, int] = {}
        for _ in range(n_kv):
            key = c.string()
            vt = c.u32()
            if key in self.metadata:
                raise GGUFError(f"duplicate metadata key {key}")
            self.metadata[key] = c.value(vt)
            self.metadata_types[key] = vt

        self.tensors: Dict[str, TensorInfo] = {}
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.u32()
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"{name}: n_dims={n_dims}")
            ne = tuple(c.u64() for _ in range(n_dims))
            ttype = c.u32()
            off = c.u64()
            if name in self.tensors:
                raise GGUFError(f"duplicate tensor {name}")
            self.tensors[name] = TensorInfo(name, ne, ttype, off)

        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise GGUFError(f"general.alignment={self.alignment} is not a power of two")
        self.data_offset = (c.pos + self.alignment - 1) // self.alignment * self.alignment
        for t in self.tensors.values():
            if t.offset % self.alignment != 0:
                raise GGUFError(f"{t.name}: offset {t.offset} not aligned to {self.alignment}")
            end = self.data_offset + t.offset + t.n_bytes
            if end > len(self.buf):
                raise GGUFError(f"{t.name}: data [{t.offset}, +{t.n_bytes}) beyond end of file")

    # ---- convenience -------------------------------------------------------
    @property
    def arch(self) -> str:
        return self.metadata["general.architecture"]

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def raw(self, name: str) -> bytes:
        t = self.tensors[name]
        start = self.data_offset + t.offset
        return self.buf[start:start + t.n_bytes]

    def tensor(self, name: str) -> np.ndarray:
        """Dequantised float64 array of shape reversed(ne)."""
        t = self.tensors[name]
        flat = dequantize(self.raw(name), t.type, t.n_elements)
        return flat.reshape(t.np_shape)


# ---- dequantisation ---------------------------------------------------------

def _f16(b: np.ndarray) -> np.ndarray:
    """uint8 array (..., 2) -> float64 of the little-endian IEEE halves."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float64)


def dequantize(data: bytes, ttype: int, n: int) -> np.ndarray:
    raw = np.frombuffer(data, dtype=np.uint8)
    if ttype == T_F32:
        return np.frombuffer(data, dtype="<f4", count=n).astype(np.float64)
    if ttype == T_F16:
        return np.frombuffer(data, dtype="<f2", count=n).astype(np.float64)
    if ttype == T_BF16:
        bits = np.frombuffer(data, dtype="<u2", count=n).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    if ttype == T_Q8_0:
        b = raw.reshape(-1, 34)
        d = _f16(b[:, 0:2].reshape(-1, 1, 2))                  # (nb, 1)
        q = b[:, 2:34].view(np.int8).astype(np.float64)        # (nb, 32)
        return (d * q).reshape(-1)[:n]
    if ttype == T_Q4_0:
        b = raw.reshape(-1, 18)
        d = _f16(b[:, 0:2].reshape(-1, 1, 2))                  # (nb, 1)
        qs = b[:, 2:18]
        lo = (qs & 0x0F).astype(np.float64) - 8.0              # elements 0..15
        hi = (qs >> 4).astype(np.float64) - 8.0                # elements 16..31
        return (d * np.concatenate([lo, hi], axis=1)).reshape(-1)[:n]
    if ttype in (T_Q4_1, T_Q5_0, T_Q5_1):
        return _dequant_q4_1_q5(raw, ttype)[:n]
    if ttype == T_IQ4_NL:
        # 18 bytes per 32: f16 d, qs[16]; element j is IQ4_NL's value of the low nibble
        # of qs[j], element 16 + j of the high one, times d.
        b = raw.reshape(-1, 18)
        d = _f16(b[:, 0:2].reshape(-1, 1, 2))
        qs = b[:, 2:18]
        return (d * np.concatenate([_IQ4_VALUES[qs & 15], _IQ4_VALUES[qs >> 4]], axis=1)).reshape(-1)[:n]
    if ttype == T_MXFP4:
        b = raw.reshape(-1, 17)
        scale = np.ldexp(1.0, b[:, 0:1].astype(np.int64) - 127)     # (nb, 1)
        qs = b[:, 1:17]
        lo, hi = _E2M1[qs & 0x0F], _E2M1[qs >> 4]
        return (scale * np.concatenate([lo, hi], axis=1)).reshape(-1)[:n]
    if ttype in (T_Q4_K, T_Q5_K):
        return _dequant_q45k(raw, ttype == T_Q5_K)[:n]
    if ttype == T_Q6_K:
        return _dequant_q6k(raw)[:n]
    if ttype == T_Q2_K:
        return _dequant_q2k(raw)[:n]
    if ttype == T_Q3_K:
        return _dequant_q3k(raw)[:n]
    if ttype == T_IQ4_XS:
        return _dequant_iq4xs(raw)[:n]
    if ttype in GRID_TYPES:
        return _dequant_grid(raw, ttype)[:n]
    name = TENSOR_TYPES.get(ttype, (str(ttype),))[0]
    raise GGUFError(f"dequantisation of tensor type {name} not implemented")


def _kquant_scale_min(s: np.ndarray):
    """s: (nb, 12) uint8 -> sc, m: (nb, 8) 6-bit scale and min per sub-block."""
    s = s.astype(np.int64)
    sc = np.zeros((s.shape[0], 8), np.int64)
    m = np.zeros((s.shape[0], 8), np.int64)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            m[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc.astype(np.float64), m.astype(np.float64)


def _dequant_q45k(raw: np.ndarray, five_bit: bool) -> np.ndarray:
    bpb = 176 if five_bit else 144
    b = raw.reshape(-1, bpb)
    nb = b.shape[0]
    d = _f16(b[:, 0:2].reshape(-1, 1, 2))
    dmin = _f16(b[:, 2:4].reshape(-1, 1, 2))
    sc, m = _kquant_scale_min(b[:, 4:16])
    if five_bit:
        qh = b[:, 16:48].astype(np.int64)                        # (nb, 32)
        qs = b[:, 48:176].astype(np.int64)
    else:
        qs = b[:, 16:144].astype(np.int64)
    out = np.zeros((nb, 256), np.float64)
    for c in range(4):                                            # 64-element chunks
        chunk = qs[:, 32 * c:32 * c + 32]
        lo = chunk & 15
        hi = chunk >> 4
        if five_bit:
            lo = lo + ((qh >> (2 * c)) & 1) * 16
            hi = hi + ((qh >> (2 * c + 1)) & 1) * 16
        j0, j1 = 2 * c, 2 * c + 1
        out[:, 64 * c:64 * c + 32] = d * sc[:, j0:j0 + 1] * lo - dmin * m[:, j0:j0 + 1]
        out[:, 64 * c + 32:64 * c + 64] = d * sc[:, j1:j1 + 1] * hi - dmin * m[:, j1:j1 + 1]
    return out.reshape(-1)


def _dequant_q4_1_q5(raw: np.ndarray, ttype: int) -> np.ndarray:
    """Blocks of 32: Q4_1 {f16 d, f16 m, qs[16]}, Q5_0 {f16 d, u32 qh, qs[16]}, Q5_1 {f16 d,
    f16 m, u32 qh, qs[16]}. Element j's quant is the low nibble of qs[j], element 16 + j's
    the high nibble; Q5 adds bit j (16 + j) of qh as bit 4. Value: d * q + m (Q4_1, Q5_1),
    d * (q - 16) (Q5_0)."""
    has_m, has_qh = ttype != T_Q5_0, ttype != T_Q4_1
    bpb = 20 if ttype == T_Q4_1 else 22 if ttype == T_Q5_0 else 24
    b = raw.reshape(-1, bpb)
    d = _f16(b[:, 0:2].reshape(-1, 1, 2))
    m = _f16(b[:, 2:4].reshape(-1, 1, 2)) if has_m else 0.0
    at = 4 if has_m else 2
    q = np.concatenate([b[:, at + 4 * has_qh:] & 15, b[:, at + 4 * has_qh:] >> 4], axis=1).astype(np.int64)
    if has_qh:
        qh = (b[:, at].astype(np.int64) | (b[:, at + 1].astype(np.int64) << 8) |
              (b[:, at + 2].astype(np.int64) << 16) | (b[:, at + 3].astype(np.int64) << 24))
        q = q | (((qh[:, None] >> np.arange(32)) & 1) << 4)
    q = q.astype(np.float64)
    return (d * q + m if has_m else d * (q - 16)).reshape(-1)


def _dequant_q2k(raw: np.ndarray) -> np.ndarray:
    """Q2_K, 84 bytes per 256: scales[16] (bits 0-3 a 4-bit scale, 4-7 a 4-bit min, one
    pair per 16 elements), qs[64] (2-bit quants), f16 d, f16 dmin. Element 128h + 32g + 16i
    + l (h < 2, g < 4, i < 2, l < 16) is bits 2g..2g+1 of qs[32h + 16i + l], with scale
    pair 8h + 2g + i: value d * scale * q - dmin * min."""
    b = raw.reshape(-1, 84)
    nb = b.shape[0]
    sc = b[:, 0:16].astype(np.int64)
    qs = b[:, 16:80].astype(np.int64)
    d = _f16(b[:, 80:82].reshape(-1, 1, 2))[:, 0]
    dmin = _f16(b[:, 82:84].reshape(-1, 1, 2))[:, 0]
    out = np.zeros((nb, 256), np.float64)
    for h in range(2):
        for g in range(4):
            for i in range(2):
                pair = sc[:, 8 * h + 2 * g + i]
                q = (qs[:, 32 * h + 16 * i:32 * h + 16 * i + 16] >> (2 * g)) & 3
                e = 128 * h + 32 * g + 16 * i
                out[:, e:e + 16] = (d * (pair & 15))[:, None] * q - (dmin * (pair >> 4))[:, None]
    return out.reshape(-1)


def _dequant_q3k(raw: np.ndarray) -> np.ndarray:
    """Q3_K, 110 bytes per 256: hmask[32], qs[64], scales[12], f16 d. Sixteen 6-bit scales:
    scale j has bits 0-3 from scales[j % 8] (low nibble for j < 8, high for j >= 8) and bits
    4-5 from bits 2(j / 4)..2(j / 4)+1 of scales[8 + j % 4]; it counts from -32. Element
    128h + 32g + 16i + l is bits 2g..2g+1 of qs[32h + 16i + l] less 4 where bit 4h + g of
    hmask[16i + l] is clear; scale 8h + 2g + i: value d * (scale - 32) * (q - 4 or q)."""
    b = raw.reshape(-1, 110)
    nb = b.shape[0]
    hm = b[:, 0:32].astype(np.int64)
    qs = b[:, 32:96].astype(np.int64)
    s = b[:, 96:108].astype(np.int64)
    d = _f16(b[:, 108:110].reshape(-1, 1, 2))[:, 0]
    scale = np.zeros((nb, 16), np.int64)
    for j in range(16):
        low = (s[:, j % 8] >> (4 * (j // 8))) & 15
        high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        scale[:, j] = (low | (high << 4)) - 32
    out = np.zeros((nb, 256), np.float64)
    for h in range(2):
        for g in range(4):
            for i in range(2):
                q = (qs[:, 32 * h + 16 * i:32 * h + 16 * i + 16] >> (2 * g)) & 3
                high_bit = (hm[:, 16 * i:16 * i + 16] >> (4 * h + g)) & 1
                e = 128 * h + 32 * g + 16 * i
                out[:, e:e + 16] = (d * scale[:, 8 * h + 2 * g + i])[:, None] * (q - 4 * (1 - high_bit))
    return out.reshape(-1)


def _dequant_iq4xs(raw: np.ndarray) -> np.ndarray:
    """IQ4_XS, 136 bytes per 256: f16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block k (32
    elements) has the 6-bit scale (nibble k % 2 of scales_l[k / 2]) | (bits 2k..2k+1 of
    scales_h) << 4, counted from -32; its element l < 16 is the low nibble of qs[16k + l],
    element 16 + l the high one, each an index into IQ4_NL's values: d * (scale - 32) * value."""
    b = raw.reshape(-1, 136)
    nb = b.shape[0]
    d = _f16(b[:, 0:2].reshape(-1, 1, 2))[:, 0]
    sh = b[:, 2].astype(np.int64) | (b[:, 3].astype(np.int64) << 8)
    sl = b[:, 4:8].astype(np.int64)
    qs = b[:, 8:136].astype(np.int64)
    out = np.zeros((nb, 256), np.float64)
    for k in range(8):
        ls = ((sl[:, k // 2] >> (4 * (k % 2))) & 15) | (((sh >> (2 * k)) & 3) << 4)
        dl = (d * (ls - 32))[:, None]
        q = qs[:, 16 * k:16 * k + 16]
        out[:, 32 * k:32 * k + 16] = dl * _IQ4_VALUES[q & 15]
        out[:, 32 * k + 16:32 * k + 32] = dl * _IQ4_VALUES[q >> 4]
    return out.reshape(-1)


# The grid types' lattice tables are the format's data (ggml-common.h), kept in the
# repository as quant/grids/<name>.inc: one hex word per entry, element j in byte j
# (little-endian): unsigned magnitudes for IQ2/IQ3, int8 -1/0/1 for IQ1.
_GRID_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "quant", "grids")
_GRIDS: dict = {}


def _grid(name: str, bytes_per_entry: int, signed: bool = False) -> np.ndarray:
    """(entries, bytes_per_entry) element values of a lattice table."""
    if name not in _GRIDS:
        with open(os.path.join(_GRID_DIR, name + ".inc")) as f:
            words = [int(w, 16) for w in re.findall(r"0x([0-9a-fA-F]+)", f.read())]
        raw = np.array(words, np.uint64).astype("<u8").view(np.uint8).reshape(len(words), 8)[:, :bytes_per_entry]
        _GRIDS[name] = (raw.view(np.int8) if signed else raw).astype(np.float64)
    return _GRIDS[name]


def _signs7(index7: np.ndarray) -> np.ndarray:
    """The 8 signs (+-1, element j from bit j) of a 7-bit sign index: bit 7 makes the
    count of minus signs even (IQ2_XXS, IQ2_XS, IQ3_XXS)."""
    i = index7 & 127
    parity = np.zeros_like(i)
    for b in range(7):
        parity ^= (i >> b) & 1
    bits = i | (parity << 7)
    return _signs8(bits)


def _signs8(bits: np.ndarray) -> np.ndarray:
    """(..., 8) signs: -1 where bit j of `bits` is set, +1 elsewhere."""
    return 1.0 - 2.0 * ((bits[..., None] >> np.arange(8)) & 1)


def _u16(b: np.ndarray, at: int) -> np.ndarray:
    return b[:, at].astype(np.int64) | (b[:, at + 1].astype(np.int64) << 8)


def _u32(b: np.ndarray, at: int) -> np.ndarray:
    return _u16(b, at) | (_u16(b, at + 2) << 16)


def _dequant_grid(raw: np.ndarray, ttype: int) -> np.ndarray:
    """The grid-coded types: blocks of 256 in sub-blocks of 32, each group l of 8
    elements (element 8l + j) one lattice entry, with signs and a sub-block scale:
      IQ2_XXS (66 B: f16 d, then per sub-block 4 entry bytes and a u32 of four 7-bit sign
        indices and a 4-bit scale s in its top bits): d * (s + 1/2) / 4 * entry * sign;
      IQ2_XS (74 B: f16 d, u16 qs[32] (9-bit entry | 7-bit sign index), scales[8], a
        nibble per half sub-block): as IQ2_XXS with each half's scale;
      IQ2_S (82 B: f16 d, qs[32] entry low bytes, signs[32] (a byte per group), qh[8] (2
        high entry bits per group), scales[8]): as IQ2_XS, signs bit by bit;
      IQ3_XXS (98 B: f16 d, qs[64] (an entry byte per 4 elements), u32[8] as IQ2_XXS's):
        d * (s + 1/2) / 2 * entry * sign;
      IQ3_S (110 B: f16 d, qs[64], qh[8] (the 9th entry bit), signs[32], scales[4] (a
        nibble per sub-block)): d * (2s + 1) * entry * sign;
      IQ1_S (50 B: f16 d, qs[32] entry low bytes, u16 qh[8]: 3 high entry bits per group,
        the 3-bit scale in bits 12-14, the delta's sign in bit 15): d * (2s + 1) *
        (entry +- 1/8);
      IQ1_M (56 B: qs[32], qh[16] (a nibble per group: 3 high entry bits, the delta's
        sign), u16[4] scales (3 bits per half sub-block; their top nibbles make f16 d)):
        d * (2s + 1) * (entry +- 1/8)."""
    name, _, bpb = TENSOR_TYPES[ttype]
    b = raw.reshape(-1, bpb)
    nb = b.shape[0]
    out = np.zeros((nb, 8, 4, 8), np.float64)  # block, sub-block, group, element
    if ttype != T_IQ1_M:
        d = _f16(b[:, 0:2].reshape(-1, 1, 2))[:, 0]
    for k in range(8):
        if ttype in (T_IQ2_XXS, T_IQ3_XXS):
            three = ttype == T_IQ3_XXS
            aux = _u32(b, 66 + 4 * k) if three else _u32(b, 2 + 8 * k + 4)
            scale = d * ((aux >> 28) + 0.5) * (0.5 if three else 0.25)
            for l in range(4):
                sign = _signs7(aux >> (7 * l))
                if three:
                    g = np.concatenate([_grid("iq3xxs", 4)[b[:, 2 + 8 * k + 2 * l]],
                                        _grid("iq3xxs", 4)[b[:, 2 + 8 * k + 2 * l + 1]]], axis=1)
                else:
                    g = _grid("iq2xxs", 8)[b[:, 2 + 8 * k + l]]
                out[:, k, l] = scale[:, None] * g * sign
        elif ttype == T_IQ2_XS:
            sc = b[:, 66 + k].astype(np.int64)
            for l in range(4):
                v = _u16(b, 2 + 8 * k + 2 * l)
                half = (sc >> (4 * (l // 2))) & 15
                out[:, k, l] = (d * (half + 0.5) * 0.25)[:, None] * _grid("iq2xs", 8)[v & 511] * _signs7(v >> 9)
        elif ttype == T_IQ2_S:
            sc = b[:, 74 + k].astype(np.int64)
            qh = b[:, 66 + k].astype(np.int64)
            for l in range(4):
                idx = b[:, 2 + 4 * k + l].astype(np.int64) | (((qh >> (2 * l)) & 3) << 8)
                half = (sc >> (4 * (l // 2))) & 15
                sign = _signs8(b[:, 34 + 4 * k + l].astype(np.int64))
                out[:, k, l] = (d * (half + 0.5) * 0.25)[:, None] * _grid("iq2s", 8)[idx] * sign
        elif ttype == T_IQ3_S:
            s = (b[:, 106 + k // 2].astype(np.int64) >> (4 * (k % 2))) & 15
            qh = b[:, 66 + k].astype(np.int64)
            for l in range(4):
                lo = b[:, 2 + 8 * k + 2 * l].astype(np.int64) | (((qh >> (2 * l)) & 1) << 8)
                hi = b[:, 2 + 8 * k + 2 * l + 1].astype(np.int64) | (((qh >> (2 * l + 1)) & 1) << 8)
                g = np.concatenate([_grid("iq3s", 4)[lo], _grid("iq3s", 4)[hi]], axis=1)
                sign = _signs8(b[:, 74 + 4 * k + l].astype(np.int64))
                out[:, k, l] = (d * (2 * s + 1))[:, None] * g * sign
        elif ttype == T_IQ1_S:
            qh = _u16(b, 34 + 2 * k)
            delta = np.where(qh & 0x8000, -0.125, 0.125)
            for l in range(4):
                idx = b[:, 2 + 4 * k + l].astype(np.int64) | (((qh >> (3 * l)) & 7) << 8)
                out[:, k, l] = (d * (2 * ((qh >> 12) & 7) + 1))[:, None] * (_grid("iq1s", 8, True)[idx] + delta[:, None])
        else:  # IQ1_M
            sc = [_u16(b, 48 + 2 * i) for i in range(4)]
            dbits = (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)
            d = dbits.astype(np.uint16).view(np.float16).astype(np.float64)
            s = sc[k // 2] >> (6 * (k % 2))
            for l in range(4):
                nib = (b[:, 32 + 2 * k + l // 2].astype(np.int64) >> (4 * (l % 2))) & 15
                idx = b[:, 4 * k + l].astype(np.int64) | ((nib & 7) << 8)
                delta = np.where(nib & 8, -0.125, 0.125)
                scale = d * (2 * ((s >> (3 * (l // 2))) & 7) + 1)
                out[:, k, l] = scale[:, None] * (_grid("iq1s", 8, True)[idx] + delta[:, None])
    return out.reshape(-1)


def _dequant_q6k(raw: np.ndarray) -> np.ndarray:
    b = raw.reshape(-1, 210)
    nb = b.shape[0]
    ql_all = b[:, 0:128].astype(np.int64)
    qh_all = b[:, 128:192].astype(np.int64)
    sc_all = b[:, 192:208].view(np.int8).astype(np.float64)
    d = _f16(b[:, 208:210].reshape(-1, 1, 2))
    out = np.zeros((nb, 256), np.float64)
    for half in range(2):
        ql = ql_all[:, 64 * half:64 * half + 64]
        qh = qh_all[:, 32 * half:32 * half + 32]
        sc = sc_all[:, 8 * half:8 * half + 8]
        base = 128 * half
        for l in range(32):
            q1 = ((ql[:, l] & 15) | (((qh[:, l] >> 0) & 3) << 4)) - 32
            q2 = ((ql[:, l + 32] & 15) | (((qh[:, l] >> 2) & 3) << 4)) - 32
            q3 = ((ql[:, l] >> 4) | (((qh[:, l] >> 4) & 3) << 4)) - 32
            q4 = ((ql[:, l + 32] >> 4) | (((qh[:, l] >> 6) & 3) << 4)) - 32
            is_ = l // 16
            out[:, base + l] = d[:, 0] * sc[:, is_ + 0] * q1
            out[:, base + l + 32] = d[:, 0] * sc[:, is_ + 2] * q2
            out[:, base + l + 64] = d[:, 0] * sc[:, is_ + 4] * q3
            out[:, base + l + 96] = d[:, 0] * sc[:, is_ + 6] * q4
    return out.reshape(-1)


def describe(r: GGUFReader) -> str:
    lines = [f"GGUF v{r.version}, {len(r.metadata)} kv, {len(r.tensors)} tensors, "
             f"alignment {r.alignment}, data at {r.data_offset}"]
    for k, v in r.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            v = f"[{len(v)} items: {v[:4]} ...]"
        lines.append(f"  {k} = {v!r}")
    for t in r.tensors.values():
        lines.append(f"  {t.name:40s} {t.type_name:5s} ne={list(t.ne)} off={t.offset}")
    return "\n".join(lines)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p)
        print(describe(GGUFReader(p)))
