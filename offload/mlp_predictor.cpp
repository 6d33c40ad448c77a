#include "offload/mlp_predictor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include "offload/dot8.h"

namespace moe {
namespace {

constexpr char kBlobMagic[4] = {'M', 'L', 'P', '1'};
constexpr char kSetMagic[8] = {'M', 'O', 'E', 'P', 'R', 'E', 'D', 'S'};

class Out {
 public:
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void floats(const std::vector<float>& v) { raw(v.data(), v.size() * 4); }
  void ints(const std::vector<int>& v) {
    u32(uint32_t(v.size()));
    for (int x : v) u32(uint32_t(x));
  }
  std::vector<uint8_t> bytes;
};

class In {
 public:
  In(std::span<const uint8_t> b, const char* what) : b_(b), what_(what) {}
  void raw(void* p, size_t n) {
    if (n > b_.size() - at_) throw PredictorFormatError(std::string(what_) + " is truncated");
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
  }
  uint32_t u32() {
    uint32_t v;
    raw(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, 8);
    return v;
  }
  double f64() {
    double v;
    raw(&v, 8);
    return v;
  }
  uint32_t count(uint32_t max) {
    const uint32_t n = u32();
    if (n > max) throw PredictorFormatError(std::string(what_) + " is damaged (bad count)");
    return n;
  }
  std::string str() {
    std::string s(count(1u << 20), '\0');
    raw(s.data(), s.size());
    return s;
  }
  std::vector<float> floats(size_t n) {
    if (n > (b_.size() - at_) / 4) throw PredictorFormatError(std::string(what_) + " is truncated");
    std::vector<float> v(n);
    raw(v.data(), n * 4);
    return v;
  }
  std::vector<int> ints() {
    std::vector<int> v(count(1u << 24));
    for (int& x : v) x = int(u32());
    return v;
  }
  std::span<const uint8_t> take(size_t n) {
    if (n > b_.size() - at_) throw PredictorFormatError(std::string(what_) + " is truncated");
    auto s = b_.subspan(at_, n);
    at_ += n;
    return s;
  }
  bool atEnd() const { return at_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
  const char* what_;
};

}  // namespace

void MlpPredictor::forward(const float* x, float* h, float* logits) const {
  for (int j = 0; j < n_hidden; ++j) {
    const float s = b1[j] + dot8(w1.data() + size_t(j) * n_in, x, n_in);
    h[j] = s > 0 ? s : 0;
  }
  for (int o = 0; o < n_out; ++o) logits[o] = b2[o] + dot8(w2.data() + size_t(o) * n_hidden, h, n_hidden);
}

std::vector<uint8_t> MlpPredictor::toBlob() const {
  Out o;
  o.raw(kBlobMagic, 4);
  for (int v : {int(kFormatVersion), layer, target_layer, n_in, n_hidden, n_out, k}) o.u32(uint32_t(v));
  o.floats(w1);
  o.floats(b1);
  o.floats(w2);
  o.floats(b2);
  return std::move(o.bytes);
}

MlpPredictor MlpPredictor::fromBlob(std::span<const uint8_t> blob) {
  In in(blob, "predictor blob");
  char magic[4];
  in.raw(magic, 4);
  if (std::memcmp(magic, kBlobMagic, 4)) throw PredictorFormatError("not a moechat predictor blob");
  const uint32_t version = in.u32();
  if (version != kFormatVersion)
    throw PredictorFormatError("predictor format version " + std::to_string(version) + " is not supported");
  MlpPredictor p;
  p.layer = int(in.u32());
  p.target_layer = int(in.u32());
  p.n_in = int(in.u32());
  p.n_hidden = int(in.u32());
  p.n_out = int(in.u32());
  p.k = int(in.u32());
  if (p.n_in <= 0 || p.n_hidden <= 0 || p.n_out <= 0 || p.k <= 0 || p.k > p.n_out || p.n_in > (1 << 20) ||
      p.n_hidden > (1 << 16) || p.n_out > (1 << 16) || p.layer < 0 || p.target_layer <= p.layer)
    throw PredictorFormatError("predictor blob is damaged (impossible shape)");
  p.w1 = in.floats(size_t(p.n_hidden) * p.n_in);
  p.b1 = in.floats(size_t(p.n_hidden));
  p.w2 = in.floats(size_t(p.n_out) * p.n_hidden);
  p.b2 = in.floats(size_t(p.n_out));
  if (!in.atEnd()) throw PredictorFormatError("predictor blob has trailing bytes");
  return p;
}

const MlpPredictor* PredictorSet::forLayer(int layer) const {
  for (const auto& p : layers)
    if (p.layer == layer) return &p;
  return nullptr;
}

std::vector<uint8_t> PredictorSet::toBytes() const {
  Out o;
  o.raw(kSetMagic, 8);
  o.u32(kFileVersion);
  o.str(model_sha256);
  o.str(model_name);
  o.u32(uint32_t(distance));
  o.str(trained_on);
  o.u64(uint64_t(token_count));
  o.u64(seed);
  o.ints(train_prompts);
  o.ints(val_prompts);
  o.ints(test_prompts);
  o.u32(uint32_t(layers.size()));
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto blob = layers[i].toBlob();
    o.f64(i < val_accuracy.size() ? val_accuracy[i] : -1.0);
    o.u64(blob.size());
    o.raw(blob.data(), blob.size());
  }
  return std::move(o.bytes);
}

PredictorSet PredictorSet::fromBytes(std::span<const uint8_t> bytes) {
  In in(bytes, "predictor file");
  char magic[8];
  in.raw(magic, 8);
  if (std::memcmp(magic, kSetMagic, 8))
    throw PredictorFormatError("not a moechat predictor file (bad magic)");
  const uint32_t version = in.u32();
  if (version != kFileVersion)
    throw PredictorFormatError("predictor file version " + std::to_string(version) + " is not supported");
  PredictorSet s;
  s.model_sha256 = in.str();
  s.model_name = in.str();
  s.distance = int(in.u32());
  s.trained_on = in.str();
  s.token_count = int64_t(in.u64());
  s.seed = in.u64();
  s.train_prompts = in.ints();
  s.val_prompts = in.ints();
  s.test_prompts = in.ints();
  const uint32_t n = in.count(4096);
  for (uint32_t i = 0; i < n; ++i) {
    s.val_accuracy.push_back(in.f64());
    const uint64_t len = in.u64();
    s.layers.push_back(MlpPredictor::fromBlob(in.take(len)));
    if (s.layers.back().target_layer - s.layers.back().layer != s.distance)
      throw PredictorFormatError("predictor file is damaged (a layer of another distance)");
  }
  if (!in.atEnd()) throw PredictorFormatError("predictor file has trailing bytes");
  return s;
}

void PredictorSet::save(const std::string& path) const {
  const auto bytes = toBytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size())) || !f.flush())
    throw std::runtime_error("cannot write " + path);
}

PredictorSet PredictorSet::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return fromBytes(bytes);
}

std::vector<int> topExperts(std::span<const float> scores, int budget) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min<int>(budget, int(order.size()));
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int a, int b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
  order.resize(n);
  return order;
}

}  // namespace moe
