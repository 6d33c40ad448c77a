// Deterministic vocabularies for the synthetic models: BPE merges learned by
// plain BPE training on a small built-in text (English, code, a few other
// languages), so the tokenizers see realistic pieces and merges.
#pragma once

#include <string>

#include "models/vocab.h"

namespace moe::synth {

// "llama" (SentencePiece BPE) vocabulary of exactly target_size tokens:
//   0 <unk> (unknown), 1 <s> (control, BOS), 2 </s> (control, EOS),
//   3..258 <0x00>..<0xFF> (byte), then learned pieces (U+2581 marks a space,
//   score = -merge rank), then the corpus' most frequent characters, then
//   <unused_N> fillers (unused) when the text runs out of merges.
// bos 1, eos 2, unk 0, pad -1, eot -1; add_bos true, add_space_prefix true,
// remove_extra_whitespaces false. Throws std::invalid_argument below 260 tokens.
VocabData buildSpmVocab(int target_size);

// "gemma4" vocabulary (Gemma 4's, as llama.cpp's converter writes it: a BPE with merges
// over SentencePiece-style pieces, U+2581 for a space) of exactly target_size tokens:
//   0 <pad>, 1 <eos>, 2 <bos> (control), 3 <unk>, 4 <|turn>, 5 <turn|> (control),
//   6 <|channel>, 7 <channel|> (user-defined), 8..263 <0x00>..<0xFF> (byte), then the
//   corpus' characters, then one piece per learned merge (merges "a b" in rank order),
//   then <unusedN> fillers. bos 2, eos 1, unk 3, pad 0, eot 5 (<turn|>); add_bos true,
//   add_space_prefix false. Throws std::invalid_argument below 265 tokens.
VocabData buildGemma4Vocab(int target_size);

// "gpt2" (byte-level BPE) vocabulary of exactly target_size tokens:
//   0..255 the byte tokens (GPT-2 byte->unicode spelling; id = byte value),
//   then one token per learned merge (merges in rank order), then
//   <|unused_N|> fillers, then the special (control) tokens last:
//   <|endoftext|>, <|im_start|>, <|im_end|> and, for pre "deepseek-llm",
//   <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>.
// Ids: default (qwen2, llama-bpe, ...): bos = pad = <|endoftext|>,
//   eos = eot = <|im_end|>, add_bos false.
//   "olmo": bos = eos = pad = <|endoftext|>, eot -1, add_bos false.
//   "deepseek-llm": bos = <｜begin▁of▁sentence｜>, eos = <｜end▁of▁sentence｜>,
//   eot -1, pad = <|endoftext|>, add_bos true.
// `pre` is stored as tokenizer.ggml.pre. Throws std::invalid_argument when
// target_size leaves no room beyond the bytes and specials.
VocabData buildGpt2Vocab(int target_size, std::string pre);

}  // namespace moe::synth

namespace moe {
using synth::buildGemma4Vocab;
using synth::buildGpt2Vocab;
using synth::buildSpmVocab;
}  // namespace moe
