#!/usr/bin/env python3
"""Self-tests of tools/reference/gguf_read.py against GGUF bytes assembled by
hand here (struct.pack, no shared code with the reader) and values computed by
hand.   Run:  /usr/bin/python3 tools/reference/test_gguf_read.py
"""

import os
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_read as G  # noqa: E402


def s(text: str) -> bytes:
    b = text.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def f16(x: float) -> bytes:
    return struct.pack("<e", x)


def build(kvs, tensors, alignment=32, pad_byte=b"\xAA"):
    """tensors: list of (name, ne list, type, data bytes). Offsets are laid
    out in order, each padded to `alignment`."""
    header = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs))
    meta = b"".join(kvs)
    infos = b""
    data = b""
    for name, ne, ttype, blob in tensors:
        off = len(data)
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", ttype, off)
        data += blob
        while len(data) % alignment:
            data += pad_byte
    head = header + meta + infos
    while len(head) % alignment:
        head += pad_byte
    return head + data


class TestMetadata(unittest.TestCase):
    def setUp(self):
        kvs = [
            kv("general.architecture", 8, s("llama")),
            kv("t.u8", 0, struct.pack("<B", 250)),
            kv("t.i8", 1, struct.pack("<b", -7)),
            kv("t.u16", 2, struct.pack("<H", 65000)),
            kv("t.i16", 3, struct.pack("<h", -30000)),
            kv("t.u32", 4, struct.pack("<I", 4000000000)),
            kv("t.i32", 5, struct.pack("<i", -2000000000)),
            kv("t.f32", 6, struct.pack("<f", 1e-5)),
            kv("t.bool", 7, b"\x01"),
            kv("t.boolf", 7, b"\x00"),
            kv("t.str", 8, s("héllo")),
            kv("t.u64", 10, struct.pack("<Q", 2 ** 63 + 5)),
            kv("t.i64", 11, struct.pack("<q", -(2 ** 62))),
            kv("t.f64", 12, struct.pack("<d", 0.1)),
            kv("t.arr_i32", 9, struct.pack("<IQ", 5, 3) + struct.pack("<iii", 1, -2, 3)),
            kv("t.arr_str", 9, struct.pack("<IQ", 8, 2) + s("a b") + s("")),
            kv("t.arr_nested", 9, struct.pack("<IQ", 9, 2)
               + struct.pack("<IQ", 6, 2) + struct.pack("<ff", 0.5, -1.5)
               + struct.pack("<IQ", 8, 1) + s("x")),
            kv("t.arr_empty", 9, struct.pack("<IQ", 4, 0)),
            kv("general.alignment", 4, struct.pack("<I", 64)),
        ]
        tensors = [("w", [4], 0, struct.pack("<4f", 1, 2, 3, 4))]
        self.buf = build(kvs, tensors, alignment=64)
        self.r = G.GGUFReader(self.buf)

    def test_all_types(self):
        m = self.r.metadata
        self.assertEqual(m["general.architecture"], "llama")
        self.assertEqual(m["t.u8"], 250)
        self.assertEqual(m["t.i8"], -7)
        self.assertEqual(m["t.u16"], 65000)
        self.assertEqual(m["t.i16"], -30000)
        self.assertEqual(m["t.u32"], 4000000000)
        self.assertEqual(m["t.i32"], -2000000000)
        self.assertAlmostEqual(m["t.f32"], 1e-5, places=12)
        self.assertIs(m["t.bool"], True)
        self.assertIs(m["t.boolf"], False)
        self.assertEqual(m["t.str"], "héllo")
        self.assertEqual(m["t.u64"], 2 ** 63 + 5)
        self.assertEqual(m["t.i64"], -(2 ** 62))
        self.assertEqual(m["t.f64"], 0.1)
        self.assertEqual(m["t.arr_i32"], [1, -2, 3])
        self.assertEqual(m["t.arr_str"], ["a b", ""])
        self.assertEqual(m["t.arr_nested"], [[0.5, -1.5], ["x"]])
        self.assertEqual(m["t.arr_empty"], [])
        self.assertEqual(self.r.metadata_types["t.u64"], 10)

    def test_alignment(self):
        self.assertEqual(self.r.alignment, 64)
        self.assertEqual(self.r.data_offset % 64, 0)
        np.testing.assert_array_equal(self.r.tensor("w"), [1, 2, 3, 4])

    def test_bad_magic_and_truncation(self):
        with self.assertRaises(G.GGUFError):
            G.GGUFReader(b"GGUX" + self.buf[4:])
        with self.assertRaises(G.GGUFError):
            G.GGUFReader(self.buf[:40])
        with self.assertRaises(G.GGUFError):
            G.GGUFReader(self.buf[:self.r.data_offset + 8])  # tensor data cut short


class TestTensors(unittest.TestCase):
    def setUp(self):
        # F32 2x3 matrix {ne0=3, ne1=2}: rows are contiguous
        f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
        # F16 values exactly representable
        f16s = f16(0.5) + f16(-2.0) + f16(65504.0) + f16(2 ** -24)
        # BF16: upper 16 bits of f32. 1.0f = 0x3F800000 -> 0x3F80; -3.5f = 0xC0600000 -> 0xC060
        bf16 = struct.pack("<HH", 0x3F80, 0xC060)
        # Q8_0: one block d=0.25, q = -128, -1, 0, 1, ..., (32 codes)
        q8_codes = [-128, -1, 0, 1] + list(range(2, 30))
        q8 = f16(0.25) + struct.pack("<32b", *q8_codes)
        # Q4_0 block 1: d = 0.5; byte j = (hi << 4) | lo with lo = j, hi = 15 - j
        q4a = f16(0.5) + bytes(((15 - j) << 4) | j for j in range(16))
        # Q4_0 block 2: d = -2.0; every byte 0x8F -> lo 15, hi 8
        q4b = f16(-2.0) + bytes([0x8F] * 16)
        # 3-D "expert" tensor {n_in=2, n_out=3, n_expert=2}, F32, value = 100e + 10o + i
        ex = b"".join(struct.pack("<f", 100 * e + 10 * o + i)
                      for e in range(2) for o in range(3) for i in range(2))
        tensors = [
            ("m.f32", [3, 2], 0, f32),
            ("v.f16", [4], 1, f16s),
            ("v.bf16", [2], 30, bf16),
            ("v.q8_0", [32], 8, q8),
            ("m.q4_0", [32, 2], 2, q4a + q4b),
            ("exps", [2, 3, 2], 0, ex),
        ]
        self.r = G.GGUFReader(build([kv("general.architecture", 8, s("x"))], tensors))

    def test_f32_shape(self):
        t = self.r.tensor("m.f32")
        self.assertEqual(t.shape, (2, 3))
        np.testing.assert_array_equal(t, [[1, 2, 3], [4, 5, 6]])
        self.assertEqual(t.dtype, np.float64)

    def test_f16(self):
        np.testing.assert_array_equal(self.r.tensor("v.f16"), [0.5, -2.0, 65504.0, 2 ** -24])

    def test_bf16(self):
        np.testing.assert_array_equal(self.r.tensor("v.bf16"), [1.0, -3.5])

    def test_q8_0(self):
        expect = 0.25 * np.array([-128, -1, 0, 1] + list(range(2, 30)), dtype=np.float64)
        np.testing.assert_array_equal(self.r.tensor("v.q8_0"), expect)

    def test_q4_0(self):
        t = self.r.tensor("m.q4_0")
        self.assertEqual(t.shape, (2, 32))
        # block 1: element j (<16) = 0.5*(j-8); element j+16 = 0.5*((15-j)-8)
        row0 = [0.5 * (j - 8) for j in range(16)] + [0.5 * (7 - j) for j in range(16)]
        np.testing.assert_array_equal(t[0], row0)
        self.assertEqual(t[0, 0], -4.0)
        self.assertEqual(t[0, 15], 3.5)
        self.assertEqual(t[0, 16], 3.5)
        self.assertEqual(t[0, 31], -4.0)
        # block 2: low nibble 15 -> -2*(7) = -14 ; high nibble 8 -> 0
        np.testing.assert_array_equal(t[1], [-14.0] * 16 + [0.0] * 16)

    def test_expert_layout(self):
        t = self.r.tensor("exps")
        self.assertEqual(t.shape, (2, 3, 2))  # (n_expert, n_out, n_in)
        self.assertEqual(t[1, 2, 0], 120.0)
        self.assertEqual(t[0, 1, 1], 11.0)

    def test_offsets_aligned(self):
        for info in self.r.tensors.values():
            self.assertEqual(info.offset % 32, 0)


class TestKQuants(unittest.TestCase):
    """K-quants are not needed by the goldens; checked on simple hand blocks."""

    def test_q4_k_simple(self):
        # d=1, dmin=0.5; scales: sub-block j<4: sc = j+1, m = 2; j>=4: sc = 5, m = 1
        sc = bytearray(12)
        for j in range(4):
            sc[j] = j + 1
            sc[j + 4] = 2
        for j in range(4, 8):
            sc[j + 4] = 5 | (1 << 4)
        qs = bytes([0x31] * 128)  # low nibble 1, high nibble 3
        blk = f16(1.0) + f16(0.5) + bytes(sc) + qs
        out = G.dequantize(blk, G.T_Q4_K, 256)
        for c in range(4):
            for half, q in ((0, 1), (1, 3)):
                j = 2 * c + half
                scale, mn = (j + 1, 2) if j < 4 else (5, 1)
                expect = scale * q - 0.5 * mn
                np.testing.assert_array_equal(out[64 * c + 32 * half: 64 * c + 32 * half + 32], expect)

    def test_q6_k_simple(self):
        ql = bytes([0x21] * 128)  # low 1, high 2
        qh = bytes([0b11100100] * 64)  # fields 0,1,2,3
        scales = struct.pack("<16b", *range(1, 17))
        blk = ql + qh + scales + f16(0.5)
        out = G.dequantize(blk, G.T_Q6_K, 256)
        # first half, l=0: q1 = 1|0<<4 -32 = -31 (sc[0]=1), q2 = 1|1<<4 -32 = -15 (sc[2]=3),
        # q3 = 2|2<<4 -32 = 2 (sc[4]=5), q4 = 2|3<<4 -32 = 18 (sc[6]=7)
        self.assertEqual(out[0], 0.5 * 1 * -31)
        self.assertEqual(out[32], 0.5 * 3 * -15)
        self.assertEqual(out[64], 0.5 * 5 * 2)
        self.assertEqual(out[96], 0.5 * 7 * 18)
        # l=16 uses sc[1]; second half uses sc[8..]
        self.assertEqual(out[16], 0.5 * 2 * -31)
        self.assertEqual(out[128], 0.5 * 9 * -31)


if __name__ == "__main__":
    unittest.main(verbosity=1)
