#include "inference/tokenizer/spm_tokenizer.h"

#include <sentencepiece_processor.h>

#include <unordered_set>

#include "inference/tokenizer/protobuf_wire.h"

namespace moe {

namespace {

// Field numbers of sentencepiece_model.proto, checked against the serialized
// descriptor in python3-sentencepiece 0.1.97 (sentencepiece_model_pb2.py).
namespace proto {
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerByteFallback = 35,
                   kTrainerUnkId = 40, kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43;
constexpr uint32_t kNormName = 1, kNormAddDummyPrefix = 3, kNormRemoveExtraWhitespaces = 4,
                   kNormEscapeWhitespaces = 5;
constexpr int32_t kModelTypeBpe = 2;
}  // namespace proto

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";       // U+2581 LOWER ONE EIGHTH BLOCK
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // sentencepiece's default unk_surface

// "<0x41>" -> 0x41; -1 when `piece` is not a byte piece.
int parseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  unsigned value = 0;
  for (char c : piece.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9')
      value |= static_cast<unsigned>(c - '0');
    else if (c >= 'A' && c <= 'F')
      value |= static_cast<unsigned>(c - 'A' + 10);
    else if (c >= 'a' && c <= 'f')
      value |= static_cast<unsigned>(c - 'a' + 10);
    else
      return -1;
  }
  return static_cast<int>(value);
}

int32_t typeOf(const VocabData& vocab, size_t i) {
  return i < vocab.token_types.size() ? vocab.token_types[i] : static_cast<int32_t>(TokenType::Normal);
}

// The piece text and type we hand to sentencepiece for token i. sentencepiece
// rejects empty or duplicate pieces, byte pieces not spelled <0xXX> and more
// than one unknown piece; real vocabularies occasionally carry such entries,
// so we keep the id but make the entry harmless (an unused placeholder).
std::pair<std::string, int32_t> protoPiece(const VocabData& vocab, size_t i,
                                           std::unordered_set<std::string>& seen) {
  std::string piece = vocab.tokens[i];
  int32_t type = typeOf(vocab, i);
  if (static_cast<int32_t>(i) == vocab.unk_id)
    type = static_cast<int32_t>(TokenType::Unknown);
  else if (type == static_cast<int32_t>(TokenType::Unknown) && vocab.unk_id >= 0)
    type = static_cast<int32_t>(TokenType::Unused);
  if (type < 1 || type > 6) type = static_cast<int32_t>(TokenType::Normal);
  if (type == static_cast<int32_t>(TokenType::Byte) && parseBytePiece(piece) < 0)
    type = static_cast<int32_t>(TokenType::Normal);
  if (piece.empty() || seen.count(piece)) {
    piece = "<moechat_placeholder_" + std::to_string(i) + ">";
    type = static_cast<int32_t>(TokenType::Unused);
  }
  seen.insert(piece);
  return {std::move(piece), type};
}

int32_t unknownId(const VocabData& vocab) {
  if (vocab.unk_id >= 0) return vocab.unk_id;
  for (size_t i = 0; i < vocab.tokens.size(); ++i)
    if (typeOf(vocab, i) == static_cast<int32_t>(TokenType::Unknown)) return static_cast<int32_t>(i);
  throw TokenizerError("llama vocabulary has no unknown token (sentencepiece needs one)");
}

std::string buildTrainerSpec(const VocabData& vocab, int32_t unk_id) {
  pb::WireWriter w;
  w.writeInt32Field(proto::kTrainerModelType, proto::kModelTypeBpe);
  w.writeInt32Field(proto::kTrainerVocabSize, static_cast<int32_t>(vocab.tokens.size()));
  w.writeBoolField(proto::kTrainerByteFallback, true);
  w.writeInt32Field(proto::kTrainerUnkId, unk_id);
  w.writeInt32Field(proto::kTrainerBosId, vocab.bos_id);
  w.writeInt32Field(proto::kTrainerEosId, vocab.eos_id);
  w.writeInt32Field(proto::kTrainerPadId, vocab.pad_id);
  return w.take();
}

std::string buildNormalizerSpec(const VocabData& vocab, bool add_dummy_prefix) {
  pb::WireWriter w;
  // "identity": no Unicode normalization, as llama.cpp applies none either.
  w.writeBytesField(proto::kNormName, "identity");
  w.writeBoolField(proto::kNormAddDummyPrefix, add_dummy_prefix);
  // The proto default is true; llama vocabularies want false, so always write it.
  w.writeBoolField(proto::kNormRemoveExtraWhitespaces, vocab.remove_extra_whitespaces);
  w.writeBoolField(proto::kNormEscapeWhitespaces, true);
  return w.take();
}

}  // namespace

std::string SpmTokenizer::buildModelProto(const VocabData& vocab, bool add_dummy_prefix) {
  const int32_t unk_id = unknownId(vocab);
  VocabData fixed_ids = vocab;
  fixed_ids.unk_id = unk_id;
  pb::WireWriter model;
  std::unordered_set<std::string> seen;
  seen.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    auto [piece, type] = protoPiece(fixed_ids, i, seen);
    pb::WireWriter sp;
    sp.writeBytesField(proto::kPiecePiece, piece);
    sp.writeFloatField(proto::kPieceScore, i < vocab.scores.size() ? vocab.scores[i] : 0.0f);
    sp.writeInt32Field(proto::kPieceType, type);
    model.writeBytesField(proto::kModelPieces, sp.bytes());
  }
  model.writeBytesField(proto::kModelTrainerSpec, buildTrainerSpec(fixed_ids, unk_id));
  model.writeBytesField(proto::kModelNormalizerSpec, buildNormalizerSpec(vocab, add_dummy_prefix));
  return model.take();
}

namespace {
std::unique_ptr<sentencepiece::SentencePieceProcessor> loadProcessor(const std::string& proto) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(proto);
  if (!status.ok()) throw TokenizerError("sentencepiece rejected the vocabulary: " + status.ToString());
  return sp;
}
}  // namespace

SpmTokenizer::SpmTokenizer(const VocabData& vocab) {
  loadCommon(vocab);
  add_space_prefix_ = vocab.add_space_prefix;
  with_prefix_ = loadProcessor(buildModelProto(vocab, add_space_prefix_));
  // The same model without the dummy prefix, for fragments after a special token.
  without_prefix_ = add_space_prefix_ ? loadProcessor(buildModelProto(vocab, false)) : nullptr;
}

SpmTokenizer::~SpmTokenizer() = default;

void SpmTokenizer::appendIds(std::string_view text, const sentencepiece::SentencePieceProcessor& sp,
                             std::vector<int32_t>& out) const {
  std::vector<int> ids;
  const auto status = sp.Encode(text, &ids);
  if (!status.ok()) throw TokenizerError("sentencepiece encode failed: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

void SpmTokenizer::encodeRun(std::string_view run, bool at_text_start, std::vector<int32_t>& out) const {
  const auto& later = without_prefix_ ? *without_prefix_ : *with_prefix_;
  appendIds(run, at_text_start ? *with_prefix_ : later, out);
}

std::string SpmTokenizer::tokenBytes(int32_t id) const {
  const std::string& p = piece(id);
  switch (type(id)) {
    case TokenType::Control:
    case TokenType::Unused: return {};
    case TokenType::Unknown: return std::string(kUnknownSurface);
    case TokenType::Byte: {
      const int byte = parseBytePiece(p);
      if (byte >= 0) return std::string(1, static_cast<char>(byte));
      break;
    }
    default: break;
  }
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      out.push_back(p[i++]);
    }
  }
  return out;
}

}  // namespace moe
