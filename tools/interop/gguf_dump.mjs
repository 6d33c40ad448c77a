#!/usr/bin/env node
// Prints a GGUF file as the third-party parser @huggingface/gguf sees it, as JSON:
//   node gguf_dump.mjs FILE.gguf
// { architecture, version, tensor_count, kv_count, tensor_data_offset,
//   metadata: { key: { type, sub_type?, value } }, tensors: [ { name, shape, dtype, offset } ] }
// 64-bit integers are printed as decimal strings so no precision is lost.
// Used by tests/test_gguf.cpp (interopWithHuggingfaceParser) to cross-check our writer.
import { gguf } from "@huggingface/gguf";

// The parser's own pseudo-keys for header fields, not metadata entries.
const HEADER_KEYS = new Set(["version", "tensor_count", "kv_count"]);

function plain(v) {
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

async function main() {
  const path = process.argv[2];
  if (!path) {
    console.error("usage: node gguf_dump.mjs FILE.gguf");
    process.exit(2);
  }
  const parsed = await gguf(path, { allowLocalFile: true, typedMetadata: true });
  const metadata = {};
  for (const [key, entry] of Object.entries(parsed.typedMetadata)) {
    if (HEADER_KEYS.has(key)) continue;
    metadata[key] = { type: entry.type, value: plain(entry.value) };
    if (entry.subType !== undefined) metadata[key].sub_type = entry.subType;
  }
  const out = {
    architecture: parsed.metadata["general.architecture"] ?? null,
    version: Number(parsed.metadata.version),
    tensor_count: plain(parsed.metadata.tensor_count),
    kv_count: plain(parsed.metadata.kv_count),
    tensor_data_offset: plain(parsed.tensorDataOffset),
    metadata,
    tensors: parsed.tensorInfos.map((t) => ({
      name: t.name,
      shape: t.shape.map(plain),
      dtype: t.dtype,
      offset: plain(t.offset),
    })),
  };
  process.stdout.write(JSON.stringify(out, null, 1) + "\n");
}

main().catch((e) => {
  console.error("gguf_dump: " + (e?.message ?? e));
  process.exit(1);
});
