#include "offload/routing/routing_trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "offload/routing/json_cursor.h"

namespace moe {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'M', 'O', 'E', 'R', 'O', 'U', 'T', 'E'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxLayers = 4096, kMaxExperts = 65536, kMaxTopK = 64;

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest, ties to even
  return uint16_t(u >> 16);
}

float fromBf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RoutingTraceError("routing trace " + path + ": cannot open it");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw RoutingTraceError("routing trace " + path + ": read error");
  return text;
}

// A key "prefix_N" -> N (or -1).
int suffixNumber(const std::string& key, std::string_view prefix) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return -1;
  int v = 0;
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    if (key[i] < '0' || key[i] > '9' || v > 1000000) return -1;
    v = v * 10 + (key[i] - '0');
  }
  return v;
}

class CompactReader {
 public:
  CompactReader(const std::string& bytes, const std::string& path) : b_(bytes), path_(path) {}
  void read(void* dst, size_t n, const char* what) {
    if (n > b_.size() - at_) fail(std::string("truncated in ") + what);
    std::memcpy(dst, b_.data() + at_, n);
    at_ += n;
  }
  uint32_t u32(const char* what) {
    uint32_t v;
    read(&v, 4, what);
    return v;
  }
  size_t left() const { return b_.size() - at_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw RoutingTraceError("routing trace " + path_ + ": " + what);
  }

 private:
  const std::string& b_;
  const std::string& path_;
  size_t at_ = 0;
};

RoutingTrace loadCompact(const std::string& bytes, const std::string& path) {
  CompactReader r(bytes, path);
  char magic[8];
  r.read(magic, 8, "the header");
  if (std::memcmp(magic, kMagic, 8) != 0) r.fail("not a routing trace (no MOEROUTE header, not JSON)");
  const uint32_t version = r.u32("the header");
  if (version != kVersion) r.fail("version " + std::to_string(version) + " (this build reads version 1)");
  RoutingTrace t;
  const uint32_t n_layer = r.u32("the header"), n_expert = r.u32("the header"), k = r.u32("the header");
  const uint32_t n_seq = r.u32("the header");
  if (n_layer == 0 || n_layer > kMaxLayers || n_expert == 0 || n_expert > kMaxExperts || k == 0 ||
      k > kMaxTopK || k > n_expert)
    r.fail("impossible shape " + std::to_string(n_layer) + " layers x " + std::to_string(n_expert) +
           " experts, top-" + std::to_string(k));
  const uint32_t source_len = r.u32("the header");
  if (source_len > r.left()) r.fail("truncated in the header");
  t.source.resize(source_len);
  r.read(t.source.data(), source_len, "the header");
  t.n_layer = int(n_layer), t.n_expert = int(n_expert), t.k = int(k);
  const size_t id_bytes = n_expert > 256 ? 2 : 1;
  const size_t per_token = size_t(n_layer) * k;
  std::vector<uint8_t> raw_ids;
  std::vector<uint16_t> raw_weights, ids;
  std::vector<float> weights;
  for (uint32_t s = 0; s < n_seq; ++s) {
    const uint32_t n = r.u32("a sequence header");
    if (n == 0 || uint64_t(n) * per_token * (id_bytes + 2) > r.left())
      r.fail("sequence " + std::to_string(s) + " claims " + std::to_string(n) +
             " tokens, more than the file");
    raw_ids.resize(size_t(n) * per_token * id_bytes);
    raw_weights.resize(size_t(n) * per_token);
    r.read(raw_ids.data(), raw_ids.size(), "the expert ids");
    r.read(raw_weights.data(), raw_weights.size() * 2, "the weights");
    ids.resize(size_t(n) * per_token);
    weights.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = id_bytes == 1 ? raw_ids[i] : uint16_t(raw_ids[2 * i] | (raw_ids[2 * i + 1] << 8));
      if (ids[i] >= n_expert)
        r.fail("expert id " + std::to_string(ids[i]) + " of " + std::to_string(n_expert) + " experts");
      weights[i] = fromBf16(raw_weights[i]);
    }
    t.addSequence(ids, weights);
  }
  if (r.left() != 0) r.fail("bytes after the last sequence");
  if (t.tokens() == 0) r.fail("no tokens");
  return t;
}

RoutingTrace loadJsonFolder(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() > 14 && name.ends_with("_examples.json"))
      files.push_back(it->path());
  }
  if (ec) throw RoutingTraceError("routing trace " + dir + ": " + ec.message());
  if (files.empty()) throw RoutingTraceError("routing trace " + dir + ": no *_examples.json file under it");
  std::sort(files.begin(), files.end());
  RoutingTrace all;
  for (const auto& f : files) {
    RoutingTrace one = parseFingerprintJson(readWholeFile(f.string()), f.string());
    if (all.sequences() == 0) {
      all.n_layer = one.n_layer, all.k = one.k;
    } else if (one.n_layer != all.n_layer || one.k != all.k) {
      throw RoutingTraceError("routing trace " + f.string() + ": " + one.shape() +
                              ", unlike the files before (" + all.shape() + ")");
    }
    all.n_expert = std::max(all.n_expert, one.n_expert);
    all.addSequence(one.ids, one.weights);
  }
  all.n_expert_exact = false;
  all.source = dir;
  return all;
}

}  // namespace

std::string RoutingTrace::shape() const {
  return std::to_string(n_layer) + " layers x " + (n_expert_exact ? "" : "at least ") +
         std::to_string(n_expert) + " experts, top-" + std::to_string(k);
}

void RoutingTrace::addSequence(std::span<const uint16_t> seq_ids, std::span<const float> seq_weights) {
  const size_t per_token = size_t(n_layer) * size_t(k);
  if (per_token == 0 || seq_ids.size() != seq_weights.size() || seq_ids.empty() || seq_ids.size() % per_token)
    throw std::invalid_argument("RoutingTrace::addSequence: ids and weights must be whole tokens");
  if (sequence_start.empty()) sequence_start.push_back(0);
  ids.insert(ids.end(), seq_ids.begin(), seq_ids.end());
  weights.insert(weights.end(), seq_weights.begin(), seq_weights.end());
  sequence_start.push_back(uint32_t(ids.size() / per_token));
}

void RoutingTrace::truncate(int n) {
  if (n >= tokens()) return;
  const size_t keep = size_t(std::max(n, 0)) * size_t(n_layer) * size_t(k);
  ids.resize(keep);
  weights.resize(keep);
  while (sequence_start.size() > 1 && int(sequence_start[sequence_start.size() - 2]) >= n)
    sequence_start.pop_back();
  if (sequence_start.size() > 1) sequence_start.back() = uint32_t(n);
  if (sequence_start.size() == 1) sequence_start.clear();
}

RoutingTrace parseFingerprintJson(std::string_view text, const std::string& name) {
  RoutingTrace t;
  t.n_expert_exact = false;
  t.source = name;
  std::vector<uint16_t> ids;
  std::vector<float> weights;
  // One token: layer -> (ids, weights), checked complete and of one k when the token ends.
  std::map<int, std::pair<std::vector<uint16_t>, std::vector<float>>> token;
  int max_id = -1;
  bool found = false;
  auto endToken = [&](const std::string& key) {
    if (token.empty()) throw RoutingTraceError(name + ": " + key + " has no layers");
    if (t.n_layer == 0) {
      t.n_layer = int(token.size());
      t.k = int(token.begin()->second.first.size());
      if (t.k == 0 || t.k > int(kMaxTopK))
        throw RoutingTraceError(name + ": " + key + " chose " + std::to_string(t.k) + " experts");
    }
    if (int(token.size()) != t.n_layer || token.rbegin()->first != t.n_layer - 1)
      throw RoutingTraceError(name + ": " + key + " has " + std::to_string(token.size()) +
                              " layers, not layers 0.." + std::to_string(t.n_layer - 1));
    for (const auto& [layer, choice] : token) {
      if (int(choice.first.size()) != t.k || choice.second.size() != choice.first.size())
        throw RoutingTraceError(name + ": " + key + " layer_" + std::to_string(layer) + " gives " +
                                std::to_string(choice.first.size()) + " experts and " +
                                std::to_string(choice.second.size()) + " weights, not " +
                                std::to_string(t.k));
      ids.insert(ids.end(), choice.first.begin(), choice.first.end());
      weights.insert(weights.end(), choice.second.begin(), choice.second.end());
    }
    token.clear();
  };
  try {
    JsonCursor c(text);
    c.forEachMember([&](const std::string& top) {
      if (top != "router_data") return c.skipValue();
      found = true;
      c.forEachElement([&] {
        c.forEachMember([&](const std::string& token_key) {
          if (suffixNumber(token_key, "token_") < 0)
            throw RoutingTraceError(name + ": unexpected key " + token_key);
          c.forEachMember([&](const std::string& layer_key) {
            const int layer = suffixNumber(layer_key, "layer_");
            if (layer < 0 || layer >= int(kMaxLayers) || token.count(layer))
              throw RoutingTraceError(name + ": " + token_key + ": unexpected or repeated key " + layer_key);
            auto& choice = token[layer];
            std::vector<uint16_t>& lids = choice.first;
            std::vector<float>& lw = choice.second;
            c.forEachMember([&](const std::string& field) {
              if (field == "selected_experts") {
                c.forEachElement([&] {
                  const long long id = c.readInteger();
                  if (id < 0 || id >= kMaxExperts)
                    throw RoutingTraceError(name + ": " + token_key + " " + layer_key + ": expert id " +
                                            std::to_string(id));
                  max_id = std::max(max_id, int(id));
                  lids.push_back(uint16_t(id));
                });
              } else if (field == "selected_probs") {
                c.forEachElement([&] { lw.push_back(float(c.readNumber())); });
              } else {
                c.skipValue();
              }
            });
          });
          endToken(token_key);
        });
      });
    });
    c.expectEnd();
  } catch (const JsonError& e) {
    throw RoutingTraceError(name + ": " + e.what());
  }
  if (!found) throw RoutingTraceError(name + ": no \"router_data\" (not a routing trace)");
  if (ids.empty()) throw RoutingTraceError(name + ": \"router_data\" holds no tokens");
  t.n_expert = max_id + 1;
  if (t.k > t.n_expert) t.n_expert = t.k;
  t.addSequence(ids, weights);
  return t;
}

RoutingTrace loadRoutingTrace(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return loadJsonFolder(path);
  if (!fs::exists(path, ec)) throw RoutingTraceError("routing trace " + path + ": no such file or folder");
  return parseRoutingTrace(readWholeFile(path), path);
}

RoutingTrace parseRoutingTrace(const std::string& bytes, const std::string& name) {
  size_t first = 0;
  while (first < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[first]))) ++first;
  if (first < bytes.size() && bytes[first] == '{') return parseFingerprintJson(bytes, name);
  return loadCompact(bytes, name);
}

void saveRoutingTrace(const RoutingTrace& t, const std::string& path) {
  if (t.tokens() == 0) throw RoutingTraceError("routing trace " + path + ": nothing to write");
  const std::string tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RoutingTraceError("routing trace " + path + ": cannot create it");
    auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    out.write(kMagic, 8);
    u32(kVersion), u32(uint32_t(t.n_layer)), u32(uint32_t(t.n_expert)), u32(uint32_t(t.k));
    u32(uint32_t(t.sequences()));
    u32(uint32_t(t.source.size()));
    out.write(t.source.data(), std::streamsize(t.source.size()));
    const size_t per_token = size_t(t.n_layer) * size_t(t.k);
    for (int s = 0; s < t.sequences(); ++s) {
      const size_t a = t.sequence_start[size_t(s)] * per_token,
                   b = t.sequence_start[size_t(s) + 1] * per_token;
      u32(uint32_t((b - a) / per_token));
      for (size_t i = a; i < b; ++i) {
        if (t.n_expert > 256)
          out.put(char(t.ids[i] & 0xFF)), out.put(char(t.ids[i] >> 8));
        else
          out.put(char(t.ids[i]));
      }
      for (size_t i = a; i < b; ++i) {
        const uint16_t h = toBf16(t.weights[i]);
        out.write(reinterpret_cast<const char*>(&h), 2);
      }
    }
    out.flush();
    if (!out) throw RoutingTraceError("routing trace " + path + ": write failed (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw RoutingTraceError("routing trace " + path + ": " + ec.message());
}

}  // namespace moe
