#include "offload/trainer/trace_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "quant/quant.h"

namespace moe {
namespace {

constexpr char kMagic[8] = {'M', 'O', 'E', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kTagBatch = 0x48435442;  // "BTCH"
constexpr uint32_t kTagDone = 0x454e4f44;   // "DONE"
constexpr uint32_t kMaxCount = 1u << 24;    // sanity bound on any count or string length

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

void readExact(std::FILE* f, void* p, size_t n, const char* what) {
  if (n && std::fread(p, 1, n, f) != n)
    throw TraceFormatError(std::string("trace file truncated in ") + what);
}
uint32_t readU32(std::FILE* f, const char* what) {
  uint32_t v;
  readExact(f, &v, 4, what);
  return v;
}
std::string readStr(std::FILE* f, const char* what) {
  const uint32_t n = readU32(f, what);
  if (n > kMaxCount) throw TraceFormatError(std::string("trace file damaged: bad length in ") + what);
  std::string s(n, '\0');
  readExact(f, s.data(), n, what);
  return s;
}

// Bytes of one MoE layer's rows for n tokens.
uint64_t layerBytes(const TraceHeader& h, int n) {
  return uint64_t(n) * (uint64_t(h.n_embd) * 2 + uint64_t(h.k) * 8);
}

TraceHeader readHeader(std::FILE* f) {
  char magic[8];
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, kMagic, 8))
    throw TraceFormatError("not a moechat trace file (bad magic)");
  TraceHeader h;
  h.version = readU32(f, "header");
  if (h.version != TraceHeader::kVersion)
    throw TraceFormatError("trace format version " + std::to_string(h.version) +
                           " is not supported (this build reads " + std::to_string(TraceHeader::kVersion) +
                           ")");
  h.n_layer = int(readU32(f, "header"));
  h.n_embd = int(readU32(f, "header"));
  h.n_expert = int(readU32(f, "header"));
  h.k = int(readU32(f, "header"));
  const uint32_t n_moe = readU32(f, "header");
  if (h.n_layer <= 0 || h.n_layer > 4096 || h.n_embd <= 0 || uint32_t(h.n_embd) > kMaxCount ||
      h.n_expert <= 0 || h.n_expert > 65536 || h.k <= 0 || h.k > h.n_expert || n_moe > uint32_t(h.n_layer))
    throw TraceFormatError("trace file damaged: impossible shape in the header");
  for (uint32_t i = 0; i < n_moe; ++i) {
    const int l = int(readU32(f, "header"));
    if (l < 0 || l >= h.n_layer || (!h.moe_layers.empty() && l <= h.moe_layers.back()))
      throw TraceFormatError("trace file damaged: bad MoE layer list");
    h.moe_layers.push_back(l);
  }
  h.model_sha256 = readStr(f, "header");
  h.model_name = readStr(f, "header");
  h.model_source = readStr(f, "header");
  return h;
}

struct ScanResult {
  std::map<int, std::vector<std::pair<uint64_t, std::pair<int, int>>>> batches;  // offset, (first_pos, n)
  std::set<int> done;
  uint64_t complete_end = 0;  // just past the last DONE marker (or the header)
};

// Walks the records; stops quietly at a torn tail (a killed writer), which a
// resumed run cuts off.
ScanResult scan(std::FILE* f, const TraceHeader& h) {
  ScanResult r;
  r.complete_end = uint64_t(std::ftell(f));
  std::map<int, std::vector<std::pair<uint64_t, std::pair<int, int>>>> pending;
  std::fseek(f, 0, SEEK_END);
  const uint64_t size = uint64_t(std::ftell(f));
  std::fseek(f, long(r.complete_end), SEEK_SET);
  for (;;) {
    uint32_t rec[4];
    if (std::fread(rec, 4, 1, f) != 1) break;
    if (rec[0] == kTagDone) {
      if (std::fread(rec + 1, 4, 1, f) != 1) break;
      const int p = int(rec[1]);
      r.batches[p] = std::move(pending[p]);
      pending.erase(p);
      r.done.insert(p);
      r.complete_end = uint64_t(std::ftell(f));
      continue;
    }
    if (rec[0] != kTagBatch) throw TraceFormatError("trace file damaged: unknown record");
    if (std::fread(rec + 1, 4, 3, f) != 3) break;
    const int n = int(rec[3]);
    if (n <= 0 || uint32_t(n) > kMaxCount) throw TraceFormatError("trace file damaged: bad batch size");
    const uint64_t at = uint64_t(std::ftell(f));
    const uint64_t len = uint64_t(n) * 4 + layerBytes(h, n) * h.moe_layers.size();
    if (at + len > size) break;
    pending[int(rec[1])].push_back({at, {int(rec[2]), n}});
    std::fseek(f, long(at + len), SEEK_SET);
  }
  return r;
}

}  // namespace

bool TraceHeader::sameModel(const TraceHeader& o) const {
  return model_sha256 == o.model_sha256 && n_layer == o.n_layer && n_embd == o.n_embd &&
         n_expert == o.n_expert && k == o.k && moe_layers == o.moe_layers;
}

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header)
    : path_(path), header_(header), f_(nullptr, &std::fclose) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) > 0;
  if (exists) {
    FilePtr in(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!in) throw std::runtime_error("cannot read " + path);
    const TraceHeader old = readHeader(in.get());
    if (!old.sameModel(header))
      throw TraceFormatError(path + " is a trace of another model (" + old.model_name + ", sha256 " +
                             old.model_sha256.substr(0, 12) + "); choose another output file");
    const ScanResult r = scan(in.get(), old);
    in.reset();
    done_ = r.done;
    std::filesystem::resize_file(path, r.complete_end);  // drop a torn last prompt
    f_.reset(std::fopen(path.c_str(), "ab"));
    if (!f_) throw std::runtime_error("cannot append to " + path);
    bytes_ = r.complete_end;
    return;
  }
  f_.reset(std::fopen(path.c_str(), "wb"));
  if (!f_) throw std::runtime_error("cannot write " + path);
  writeHeader(header);
  std::fflush(f_.get());
}

void TraceWriter::writeHeader(const TraceHeader& header) {
  write(kMagic, 8);
  const uint32_t fixed[6] = {header.version,          uint32_t(header.n_layer),
                             uint32_t(header.n_embd), uint32_t(header.n_expert),
                             uint32_t(header.k),      uint32_t(header.moe_layers.size())};
  write(fixed, sizeof fixed);
  for (int l : header.moe_layers) write(&l, 4);
  for (const std::string* s : {&header.model_sha256, &header.model_name, &header.model_source}) {
    const uint32_t n = uint32_t(s->size());
    write(&n, 4);
    write(s->data(), n);
  }
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::write(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_.get()) != n)
    throw std::runtime_error("cannot write " + path_ + " (disk full?)");
  bytes_ += n;
}

void TraceWriter::beginBatch(int prompt, int first_pos, std::span<const int32_t> tokens) {
  if (next_moe_ != 0 && next_moe_ != header_.moe_layers.size())
    throw std::logic_error("TraceWriter: a batch ended before its last MoE layer");
  const uint32_t rec[4] = {kTagBatch, uint32_t(prompt), uint32_t(first_pos), uint32_t(tokens.size())};
  write(rec, sizeof rec);
  write(tokens.data(), tokens.size_bytes());
  batch_tokens_ = int(tokens.size());
  next_moe_ = 0;
}

void TraceWriter::appendRawBatch(int prompt, int first_pos, int n, const void* body, size_t bytes) {
  if (next_moe_ != 0 && next_moe_ != header_.moe_layers.size())
    throw std::logic_error("TraceWriter: a batch ended before its last MoE layer");
  if (bytes != uint64_t(n) * 4 + layerBytes(header_, n) * header_.moe_layers.size())
    throw std::logic_error("TraceWriter: a raw batch of the wrong size");
  const uint32_t rec[4] = {kTagBatch, uint32_t(prompt), uint32_t(first_pos), uint32_t(n)};
  write(rec, sizeof rec);
  write(body, bytes);
  next_moe_ = 0;
}

void TraceWriter::addLayer(int layer, std::span<const float> hidden, std::span<const int> experts,
                           std::span<const float> weights) {
  const size_t n = size_t(batch_tokens_);
  if (next_moe_ >= header_.moe_layers.size() || header_.moe_layers[next_moe_] != layer ||
      hidden.size() != n * header_.n_embd || experts.size() != n * header_.k ||
      weights.size() != n * header_.k)
    throw std::logic_error("TraceWriter: layer " + std::to_string(layer) +
                           " out of order or of the wrong size");
  half_.resize(hidden.size());
  for (size_t i = 0; i < hidden.size(); ++i) half_[i] = quant::fp32ToFp16(hidden[i]);
  write(half_.data(), half_.size() * 2);
  write(experts.data(), experts.size_bytes());
  write(weights.data(), weights.size_bytes());
  ++next_moe_;
}

void TraceWriter::endPrompt(int prompt) {
  const uint32_t rec[2] = {kTagDone, uint32_t(prompt)};
  write(rec, sizeof rec);
  if (std::fflush(f_.get()) != 0) throw std::runtime_error("cannot write " + path_ + " (disk full?)");
  done_.insert(prompt);
}

TraceReader::TraceReader(const std::string& path) : path_(path) {
  FilePtr f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot read " + path);
  header_ = readHeader(f.get());
  ScanResult r = scan(f.get(), header_);
  for (auto& [p, list] : r.batches)
    for (auto& [off, pos_n] : list) batches_[p].push_back({off, pos_n.first, pos_n.second});
}

std::vector<int> TraceReader::prompts() const {
  std::vector<int> out;
  for (const auto& [p, b] : batches_) out.push_back(p);
  return out;
}

int TraceReader::tokenCount(int prompt) const {
  auto it = batches_.find(prompt);
  int n = 0;
  if (it != batches_.end())
    for (const auto& b : it->second) n += b.n;
  return n;
}

std::vector<std::pair<int, int>> TraceReader::batchSpans(int prompt) const {
  std::vector<std::pair<int, int>> out;
  if (auto it = batches_.find(prompt); it != batches_.end())
    for (const Batch& b : it->second) out.push_back({b.first_pos, b.n});
  return out;
}

int TraceReader::totalTokens() const {
  int n = 0;
  for (const auto& [p, b] : batches_) n += tokenCount(p);
  return n;
}

TraceReader::LayerRows TraceReader::read(int prompt, int layer) const {
  const auto li = std::find(header_.moe_layers.begin(), header_.moe_layers.end(), layer);
  if (li == header_.moe_layers.end())
    throw std::invalid_argument("layer " + std::to_string(layer) + " has no router");
  const size_t moe_index = size_t(li - header_.moe_layers.begin());
  auto it = batches_.find(prompt);
  if (it == batches_.end())
    throw std::invalid_argument("prompt " + std::to_string(prompt) + " is not in the trace");
  FilePtr f(std::fopen(path_.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot read " + path_);
  LayerRows rows;
  const int E = header_.n_embd, K = header_.k;
  std::vector<uint16_t> half;
  for (const Batch& b : it->second) {
    const size_t t0 = rows.tokens.size();
    rows.tokens.resize(t0 + b.n);
    std::fseek(f.get(), long(b.offset), SEEK_SET);
    readExact(f.get(), rows.tokens.data() + t0, size_t(b.n) * 4, "token ids");
    std::fseek(f.get(), long(b.offset + uint64_t(b.n) * 4 + layerBytes(header_, b.n) * moe_index), SEEK_SET);
    half.resize(size_t(b.n) * E);
    readExact(f.get(), half.data(), half.size() * 2, "hidden states");
    const size_t h0 = rows.hidden.size();
    rows.hidden.resize(h0 + half.size());
    for (size_t i = 0; i < half.size(); ++i) rows.hidden[h0 + i] = quant::fp16ToFp32(half[i]);
    const size_t e0 = rows.experts.size();
    rows.experts.resize(e0 + size_t(b.n) * K);
    rows.weights.resize(e0 + size_t(b.n) * K);
    readExact(f.get(), rows.experts.data() + e0, size_t(b.n) * K * 4, "experts");
    readExact(f.get(), rows.weights.data() + e0, size_t(b.n) * K * 4, "expert weights");
    for (size_t i = e0; i < rows.experts.size(); ++i)
      if (rows.experts[i] < 0 || rows.experts[i] >= header_.n_expert)
        throw TraceFormatError("trace file damaged: expert id out of range");
  }
  rows.n = int(rows.tokens.size());
  return rows;
}

TraceMergeResult mergeTraces(const std::vector<std::string>& inputs, const std::string& output) {
  if (inputs.empty()) throw std::invalid_argument("mergeTraces: no input traces");
  // Check every header first, so a refused input leaves nothing behind.
  std::vector<TraceHeader> headers;
  for (const std::string& in : inputs) {
    FilePtr f(std::fopen(in.c_str(), "rb"), &std::fclose);
    if (!f) throw std::runtime_error("cannot read " + in);
    headers.push_back(readHeader(f.get()));
    if (!headers.back().sameModel(headers.front()))
      throw TraceFormatError(in + " is a trace of another model (" + headers.back().model_name + ", sha256 " +
                             headers.back().model_sha256.substr(0, 12) + ") than " + inputs.front());
  }
  const std::string tmp = output + ".part";
  std::filesystem::remove(tmp);
  TraceMergeResult result;
  try {
    TraceWriter out(tmp, headers.front());
    std::vector<char> buf;
    for (const std::string& in : inputs) {
      FilePtr f(std::fopen(in.c_str(), "rb"), &std::fclose);
      if (!f) throw std::runtime_error("cannot read " + in);
      const TraceHeader h = readHeader(f.get());
      const ScanResult r = scan(f.get(), h);
      for (const auto& [p, list] : r.batches) {
        const int prompt = result.prompts++;
        for (const auto& [offset, pos_n] : list) {
          const auto [first_pos, n] = pos_n;
          const uint64_t len = uint64_t(n) * 4 + layerBytes(h, n) * h.moe_layers.size();
          buf.resize(size_t(len));
          std::fseek(f.get(), long(offset), SEEK_SET);
          readExact(f.get(), buf.data(), buf.size(), "a batch");
          out.appendRawBatch(prompt, first_pos, n, buf.data(), buf.size());
          result.tokens += n;
        }
        out.endPrompt(prompt);
      }
    }
    result.bytes = out.bytesWritten();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, output);
  return result;
}

}  // namespace moe
