#!/usr/bin/env node
// Rewrites a GGUF file's header with the third-party writer of @huggingface/gguf
// (buildGgufHeader: the code behind the Hugging Face hub's GGUF metadata editor),
// keeping the tensor data, and sets one extra metadata key so the rewrite is real:
//   node gguf_rewrite.mjs IN.gguf OUT.gguf
// Used by tests/test_gguf_robustness.cpp (runsModelsWhoseHeaderAThirdPartyWrote).
import {openAsBlob} from 'node:fs';
import {writeFile} from 'node:fs/promises';
import {gguf, buildGgufHeader} from '@huggingface/gguf';

async function main() {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error('usage: node gguf_rewrite.mjs IN.gguf OUT.gguf');
    process.exit(2);
  }
  const parsed = await gguf(input, {allowLocalFile: true, typedMetadata: true});
  const metadata = {...parsed.typedMetadata};
  metadata['general.description'] = {type: 8 /* STRING */, value: 'header rewritten by @huggingface/gguf'};
  metadata.kv_count = {...metadata.kv_count, value: metadata.kv_count.value + 1n};
  const blob = await openAsBlob(input);
  const alignment = Number(parsed.metadata['general.alignment'] ?? 32);
  const header = await buildGgufHeader(blob, metadata, {
    littleEndian: parsed.littleEndian,
    tensorInfoByteRange: parsed.tensorInfoByteRange,
    alignment,
  });
  const data = blob.slice(Number(parsed.tensorDataOffset));
  await writeFile(
      output,
      Buffer.concat([Buffer.from(await header.arrayBuffer()), Buffer.from(await data.arrayBuffer())]));
}

main().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
