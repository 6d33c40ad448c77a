#!/usr/bin/env python3
"""Writes the GGUF reader's test corpus (valid and malformed files) byte by byte.

Built independently of moechat's writer, straight from the layout in ggml
docs/gguf.md (shared/GGUF-NOTES.md): header (magic, version, tensor_count,
kv_count), key/values, tensor infos, padding to general.alignment, data.
MANIFEST.txt lists each file with the error substring the reader must report
("ok" when it must open) and, optionally, what VocabData::fromGguf must say.

Run from anywhere: python3 make_corpus.py  (rewrites the files next to it).
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
F32_T, F16_T, Q4_0_T, Q8_0_T, Q4_K_T, Q6_K_T, BF16_T, MXFP4_T = 0, 1, 2, 8, 12, 14, 30, 39
BLOCK = {F32_T: (1, 4), F16_T: (1, 2), Q4_0_T: (32, 18), Q8_0_T: (32, 34), Q4_K_T: (256, 144),
         Q6_K_T: (256, 210), BF16_T: (1, 2), MXFP4_T: (32, 17)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack('<I', vtype) + payload


def arr(etype, elems_payload, count):
    return struct.pack('<IQ', etype, count) + elems_payload


def header(n_tensors, n_kv, magic=b'GGUF', version=3):
    return magic + struct.pack('<IQQ', version, n_tensors, n_kv)


def nbytes(dims, ttype):
    be, bb = BLOCK[ttype]
    n = dims[0] // be * bb
    for d in dims[1:]:
        n *= d
    return n


def tinfo(name, dims, ttype, offset):
    return s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims) + \
        struct.pack('<IQ', ttype, offset)


def pad(b, align):
    return b + b'\0' * ((-len(b)) % align)


def build(kvs, tensors, align=32, pad_end=True):
    """tensors: list of (name, dims, type); data = repeating byte pattern; offsets aligned."""
    infos, data, offsets = b'', b'', []
    for name, dims, ttype in tensors:
        data = pad(data, align)
        offsets.append(len(data))
        n = nbytes(dims, ttype)
        data += bytes((i * 7 + len(name)) & 0xff for i in range(n))
        infos += tinfo(name, dims, ttype, offsets[-1])
    head = header(len(tensors), len(kvs)) + b''.join(kvs) + infos
    out = pad(head, align) + (pad(data, align) if pad_end else data)
    return out


FILES = {}
MANIFEST = []


def add(name, content, expect, vocab=None):
    FILES[name] = content
    MANIFEST.append((name, expect, vocab))


arch = kv('general.architecture', STR, s('llama'))

# ---- valid files ---------------------------------------------------------
add('ok_empty.gguf', header(0, 0), 'ok')
add('ok_all_value_types.gguf', build([
    kv('t.u8', U8, struct.pack('<B', 200)), kv('t.i8', I8, struct.pack('<b', -5)),
    kv('t.u16', U16, struct.pack('<H', 60000)), kv('t.i16', I16, struct.pack('<h', -30000)),
    kv('t.u32', U32, struct.pack('<I', 4000000000)), kv('t.i32', I32, struct.pack('<i', -2000000000)),
    kv('t.f32', F32, struct.pack('<f', 1.5)), kv('t.bool', BOOL, b'\x01'),
    kv('t.str', STR, s('héllo')), kv('t.u64', U64, struct.pack('<Q', 2**63 + 5)),
    kv('t.i64', I64, struct.pack('<q', -2**62)), kv('t.f64', F64, struct.pack('<d', -0.25)),
    kv('t.arr_str', ARR, arr(STR, s('a') + s('') + s('c d'), 3)),
    kv('t.arr_nested', ARR, arr(ARR, arr(I32, struct.pack('<ii', 1, -2), 2) + arr(I32, b'', 0), 2)),
], [('w', [4, 2], F32_T)]), 'ok')
add('ok_quant_types.gguf', build([arch], [
    ('q8', [64, 2], Q8_0_T), ('q4', [32], Q4_0_T), ('q4k', [256, 2], Q4_K_T), ('q6k', [256], Q6_K_T),
    ('mx', [32, 2, 3], MXFP4_T), ('h', [3, 5], F16_T), ('b', [7], BF16_T)]), 'ok')
add('ok_align64.gguf', build([kv('general.alignment', U32, struct.pack('<I', 64))],
                             [('a', [3], F32_T), ('b', [5], F32_T)], align=64), 'ok')
# llama.cpp accepts any power-of-two alignment; so do we (gguf.md asks for a multiple of 8).
add('ok_align1.gguf', build([kv('general.alignment', U32, struct.pack('<I', 1))],
                            [('a', [3], F16_T), ('b', [5], F16_T)], align=1), 'ok')
add('ok_no_end_padding.gguf', build([arch], [('a', [3], F32_T)], pad_end=False), 'ok')
add('ok_split_keys.gguf', build([arch, kv('split.no', U16, struct.pack('<H', 0)),
                                 kv('split.count', U16, struct.pack('<H', 3)),
                                 kv('split.tensors.count', I32, struct.pack('<i', 9))],
                                [('a', [8], F32_T)]), 'ok')
vocab_kvs = [kv('tokenizer.ggml.model', STR, s('llama')),
             kv('tokenizer.ggml.tokens', ARR, arr(STR, s('<unk>') + s('<s>') + s('</s>') + s('a'), 4)),
             kv('tokenizer.ggml.scores', ARR, arr(F32, struct.pack('<4f', 0, 0, 0, -1), 4)),
             kv('tokenizer.ggml.token_type', ARR, arr(I32, struct.pack('<4i', 2, 3, 3, 1), 4)),
             kv('tokenizer.ggml.bos_token_id', U32, struct.pack('<I', 1)),
             kv('tokenizer.ggml.eos_token_id', U32, struct.pack('<I', 2))]
add('ok_vocab.gguf', build(vocab_kvs, []), 'ok', 'ok')
add('vocab_scores_short.gguf', build(vocab_kvs[:2] + [
    kv('tokenizer.ggml.scores', ARR, arr(F32, struct.pack('<3f', 0, 0, 0), 3))], []), 'ok',
    'tokenizer.ggml.scores has 3 entries')
add('vocab_bos_out_of_range.gguf', build(vocab_kvs[:2] + [
    kv('tokenizer.ggml.bos_token_id', U32, struct.pack('<I', 4))], []), 'ok',
    'tokenizer.ggml.bos_token_id = 4 is outside')
add('vocab_tokens_not_strings.gguf', build([vocab_kvs[0], kv('tokenizer.ggml.tokens', ARR,
                                            arr(I32, struct.pack('<i', 1), 1))], []), 'ok',
    "expected an array of strings")
add('vocab_bad_token_type.gguf', build(vocab_kvs[:2] + [
    kv('tokenizer.ggml.token_type', ARR, arr(I32, struct.pack('<4i', 1, 1, 9, 1), 4))], []), 'ok',
    'token_type[2] = 9')

# ---- malformed files -----------------------------------------------------
small = build([arch], [('a', [4], F32_T)])
add('bad_empty_file.gguf', b'', 'empty file (no GGUF header)')
add('bad_magic.gguf', b'GGUX' + small[4:], 'bad magic')
add('bad_version2.gguf', small[:4] + struct.pack('<I', 2) + small[8:], 'unsupported GGUF version 2 (need 3)')
add('bad_truncated_header.gguf', small[:13], 'truncated file: tensor_count')
add('bad_huge_kv_count.gguf', header(0, 2**62), 'kv_count 4611686018427387904 cannot fit')
add('bad_huge_tensor_count.gguf', header(2**60, 0) + b'\0' * 64, 'tensor_count 1152921504606846976 cannot fit')
add('bad_huge_string.gguf', header(0, 1) + struct.pack('<Q', 2**63) + b'k' * 16, 'key of metadata entry 0 (9223372036854775808 bytes)')
add('bad_huge_array.gguf', header(0, 1) + kv('x', ARR, arr(U64, b'\0' * 16, 2**40)), "key 'x': array of 1099511627776 u64 elements")
nested = b''
for _ in range(20):
    nested += struct.pack('<IQ', ARR, 1)
nested += struct.pack('<IQ', U8, 0)
add('bad_deep_nesting.gguf', header(0, 1) + kv('deep', ARR, nested), "key 'deep': arrays nested deeper than 8")
add('bad_unknown_value_type.gguf', header(0, 1) + s('k') + struct.pack('<I', 13) + b'\0' * 8, "key 'k': unknown value type 13")
add('bad_unknown_array_type.gguf', header(0, 1) + kv('k', ARR, arr(99, b'', 0)), "key 'k': unknown array element type 99")
add('bad_bool_byte.gguf', header(0, 1) + kv('flag', BOOL, b'\x02'), "key 'flag': bool byte 2")
add('bad_empty_key.gguf', header(0, 1) + kv('', U8, b'\x01'), 'has an empty key')
add('bad_dup_key.gguf', build([arch, arch], []), "duplicate metadata key 'general.architecture'")
add('bad_dup_tensor.gguf', build([], [('a', [4], F32_T), ('a', [4], F32_T)]), "duplicate tensor name 'a'")
add('bad_name_too_long.gguf', build([], [('n' * 65, [4], F32_T)]), 'name of 65 bytes exceeds 64')
add('bad_n_dims0.gguf', header(1, 0) + s('a') + struct.pack('<IIQ', 0, 0, 0) + b'\0' * 32, "tensor 'a': n_dims 0 outside 1..4")
add('bad_n_dims5.gguf', header(1, 0) + tinfo('a', [1, 1, 1, 1, 1], F32_T, 0) + b'\0' * 32, "tensor 'a': n_dims 5 outside 1..4")
add('bad_dim_zero.gguf', build([], [('a', [4], F32_T)]).replace(struct.pack('<Q', 4), struct.pack('<Q', 0), 1), "tensor 'a': ne0 is 0")
add('bad_elem_overflow.gguf', header(1, 0) + tinfo('a', [2**32, 2**32], F32_T, 0) + b'\0' * 32, "tensor 'a': element count overflows")
add('bad_unknown_tensor_type.gguf', header(1, 0) + tinfo('blk.0.x', [4], 77, 0) + b'\0' * 32, "tensor 'blk.0.x': unknown tensor type id 77")
add('bad_ne0_not_block.gguf', header(1, 0) + tinfo('q', [48], Q8_0_T, 0) + b'\0' * 128, "tensor 'q': ne0 48 is not a multiple of the Q8_0 block size 32")
add('bad_kquant_ne0.gguf', header(1, 0) + tinfo('k', [128], Q4_K_T, 0) + b'\0' * 256, "tensor 'k': ne0 128 is not a multiple of the Q4_K block size 256")
add('bad_offset_unaligned.gguf', pad(header(1, 0) + tinfo('a', [4], F32_T, 8), 32) + b'\0' * 64, "tensor 'a': offset 8 is not a multiple of the alignment 32")
past = build([], [('blk.0.ffn_up_exps.weight', [32, 4, 2], Q8_0_T)])
add('bad_past_eof.gguf', past[:-64], "tensor 'blk.0.ffn_up_exps.weight': data [96, 368) runs past end of file (size 320)")
add('bad_offset_huge.gguf', pad(header(1, 0) + tinfo('a', [4], F32_T, 2**64 - 32), 32) + b'\0' * 32, "tensor 'a': data [18446744073709551648, 18446744073709551664) runs past end of file (size 96)")
ov = pad(header(2, 0) + tinfo('a', [16], F32_T, 0) + tinfo('b', [8], F32_T, 32), 32) + b'\0' * 64
add('bad_overlap.gguf', ov, "tensor 'b': data at offset 32 overlaps tensor 'a' [0, 64)")
add('bad_alignment_not_pow2.gguf', build([kv('general.alignment', U32, struct.pack('<I', 48))], []), 'general.alignment 48 is not a power of two')
add('bad_alignment_zero.gguf', build([kv('general.alignment', U32, struct.pack('<I', 0))], []), 'general.alignment 0 is not a power of two')
add('bad_alignment_type.gguf', build([kv('general.alignment', U64, struct.pack('<Q', 32))], []), 'general.alignment must be u32, found u64')
add('bad_data_start_past_eof.gguf', header(1, 0) + tinfo('a', [1], F32_T, 0), 'data section (aligned to 32 after offset 57) starts past end of file (size 57)')
add('bad_truncated_tensor_info.gguf', small[:len(small) - 40][:60], 'truncated file')

add('bad_alignment_huge.gguf', build([kv('general.alignment', U32, struct.pack('<I', 2**21))], []),
    'general.alignment 2097152 exceeds the supported maximum 1048576')

# Inputs found by fuzzing (kept as found; not regenerated here): file, expected error.
FUZZ_REGRESSIONS = [
    # libFuzzer OOM, 2026-11-22: no tensors, general.alignment = 2^31; the reader accepted
    # it and rewriting the file padded the header to 2 GiB.
    ('fuzz_oom_alignment_2pow31.gguf', 'general.alignment 2147483648 exceeds the supported maximum'),
    # libFuzzer slow unit (24 s), same cause with 2^29.
    ('fuzz_slow_alignment_2pow29.gguf', 'general.alignment 536870912 exceeds the supported maximum'),
]
for name, expect in FUZZ_REGRESSIONS:
    MANIFEST.append((name, expect, None))

for name, content in FILES.items():
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(content)
with open(os.path.join(HERE, 'MANIFEST.txt'), 'w') as f:
    f.write('# file<TAB>open: "ok" or expected GgufError substring[<TAB>vocab: "ok" or substring]\n')
    f.write('# Generated by make_corpus.py; fuzz_* files are inputs found by fuzzing (FUZZ_REGRESSIONS there).\n')
    for name, expect, vocab in MANIFEST:
        f.write(name + '\t' + expect + ('\t' + vocab if vocab else '') + '\n')
