#include "inference/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "inference/cpu/cpu_scratch.h"
#include "inference/cpu/vector_ops.h"
#include "inference/host_memory.h"
#include "quant/quant.h"
#include "quant/quant_repack.h"

namespace moe {
namespace {

using cpu::scratch;
using gguf::TensorType;

// Below this many multiply-adds a loop runs on the calling thread: waking the
// pool costs a few microseconds, about what 64K multiply-adds take.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;
// Batched float matmul dequantises this many weight rows at a time, then dots them
// with every token while one token's activations stay in L1.
constexpr int64_t kRowTile = 8;
// Quantised matmul: a thread's unit of work is this many rows (64 bytes of each
// token's output, so no two threads write one cache line) times a block of tokens
// (whose quantised activations stay in L2 while the rows are reused for them).
constexpr int64_t kQuantRowTile = 16;
constexpr int kQuantTokenBlock = 64;
static_assert(kQuantRowTile % quant::kRowGroup == 0, "a row tile is whole interleaved groups");
// A weight kept in the file layout (the offload policies' host copies, a model too
// large to repack) has a work item's rows repacked into groups on the fly when the
// item has at least this many tokens: the copy costs about what 4-8 tokens gain
// (one thread, 16 rows of 2048: 2.3-3.9 us to repack; groups 1.4-2.9x faster than
// the file layout at 16 tokens, 1.5-3.8x at 64).
constexpr int kRepackTileTokens = 16;

void checkWeight(const WeightView& w, const char* op) {
  if (w.empty() || w.cols <= 0 || w.rows <= 0)
    throw std::invalid_argument(std::string("cpu backend: ") + op + ": empty weight");
  if (!quant::isComputeSupported(w.type))
    throw std::invalid_argument(std::string("cpu backend: ") + op + ": tensor type " +
                                gguf::tensorTypeName(w.type) + " is not supported for compute");
}

// sum of squares with 8 independent double lanes: precise, and vectorisable.
double sumSquares(const float* x, int dim) {  // x: [dim]
  double lanes[8] = {};
  int i = 0;
  for (; i + 8 <= dim; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]) * x[i + l];
  for (; i < dim; ++i) lanes[0] += static_cast<double>(x[i]) * x[i];
  double s = 0.0;
  for (double v : lanes) s += v;
  return s;
}

}  // namespace

CpuBackend::CpuBackend(int threads) : pool_(threads) {}

CpuBackend::~CpuBackend() {
  for (float* p : allocations_) std::free(p);
  for (const uint8_t* p : repacked_) std::free(const_cast<uint8_t*>(p));
}

std::string CpuBackend::name() const {
  return "cpu (" + std::to_string(threads()) + " threads, " + quant::dotIsaName(isa_) + ")";
}

void CpuBackend::setDotIsa(quant::DotIsa isa) {
  if (!quant::dotIsaAvailable(isa))
    throw std::invalid_argument(std::string("cpu backend: the ") + quant::dotIsaName(isa) +
                                " kernels cannot run on this CPU");
  isa_ = isa;
}

void CpuBackend::forEach(int64_t n, int64_t work_per_item, const ThreadPool::RangeFn& fn) {
  const int64_t grain = std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, work_per_item));
  pool_.parallelFor(n, grain, fn);
}

// ---------------------------------------------------------------------------
// Memory

float* CpuBackend::allocFloats(size_t n) {
  // aligned_alloc wants a size that is a multiple of the alignment; never 0 bytes.
  const size_t bytes = std::max<size_t>(64, (n * sizeof(float) + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  std::lock_guard lock(alloc_mu_);
  allocations_.insert(p);
  return p;
}

void CpuBackend::freeFloats(float* p) {
  if (!p) return;
  {
    std::lock_guard lock(alloc_mu_);
    if (allocations_.erase(p) == 0)
      throw std::invalid_argument("cpu backend: freeFloats of a pointer it did not allocate");
  }
  std::free(p);
}

void CpuBackend::copy(float* dst, const float* src, size_t n) {  // [n]
  if (n) std::memmove(dst, src, n * sizeof(float));
}

void CpuBackend::zero(float* y, size_t n) { std::fill(y, y + n, 0.0f); }

void CpuBackend::toHost(float* host_dst, const float* src, size_t n) { copy(host_dst, src, n); }

void CpuBackend::fromHost(float* dst, const float* host_src, size_t n) { copy(dst, host_src, n); }

// ---------------------------------------------------------------------------
// Weights

WeightView CpuBackend::prepareWeight(const WeightView& host) {
  if (!repack_ || host.interleaved() || !quant::isRepackable(host.type) || host.rows <= 0 ||
      host.rows % quant::kRowGroup != 0)
    return host;
  checkWeight(host, "prepareWeight");
  const size_t group_bytes = quant::repackedGroupBytes(host.type, host.cols);
  const int64_t groups = host.rows / quant::kRowGroup;
  const size_t bytes = (group_bytes * static_cast<size_t>(groups) + 63) / 64 * 64;
  if (availableMemoryBytes() < bytes + repack_reserve_) return host;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  if (!buf) throw std::bad_alloc();
  forEach(groups, static_cast<int64_t>(group_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g)
      quant::repackRows(host.type, host.data + static_cast<size_t>(g * quant::kRowGroup) * host.row_bytes,
                        host.row_bytes, host.cols, buf + static_cast<size_t>(g) * group_bytes);
  });
  {
    std::lock_guard lock(alloc_mu_);
    repacked_.insert(buf);
  }
  WeightView v = host;
  v.data = buf;
  v.group_bytes = group_bytes;
  return v;
}

void CpuBackend::releaseWeight(const WeightView& prepared) {
  if (!prepared.interleaved()) return;
  {
    std::lock_guard lock(alloc_mu_);
    if (repacked_.erase(prepared.data) == 0)
      throw std::invalid_argument("cpu backend: releaseWeight of a weight it did not repack");
  }
  std::free(const_cast<uint8_t*>(prepared.data));
}

void CpuBackend::embed(const WeightView& table, const int32_t* tokens, int n_tokens,
                       float* out) {  // table: [n_vocab][dim]; out: [n_tokens][dim]
  checkWeight(table, "embed");
  for (int t = 0; t < n_tokens; ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= table.rows)
      throw std::out_of_range("cpu backend: embed: token id " + std::to_string(id) + " outside [0, " +
                              std::to_string(table.rows) + ")");
    dequantizeWeightRow(table, id, out + static_cast<size_t>(t) * table.cols);
  }
}

void CpuBackend::setQuantisedActivations(bool on) {
  if (!on) {
    std::lock_guard lock(alloc_mu_);
    if (!repacked_.empty())
      throw std::logic_error("CpuBackend::setQuantisedActivations(false) after weights were repacked");
    repack_ = false;
  }
  quantised_activations_ = on;
}

void CpuBackend::matmul(const WeightView& w, const float* x, float* y,
                        int n_tokens) {  // w: [rows][cols]; x: [n_tokens][cols]; y: [n_tokens][rows]
  checkWeight(w, "matmul");
  if (n_tokens <= 0) return;
  if (quantised_activations_ && quant::activationFormat(w.type) != quant::ActivationFormat::None) {
    const MatmulJob job{w, x, y, n_tokens};
    matmulQuantized({&job, 1});
  } else if (n_tokens == 1) {
    matmulOneToken(w, x, y);
  } else {
    matmulBatch(w, x, y, n_tokens);
  }
}

void CpuBackend::matmulMany(std::span<const MatmulJob> jobs) {
  std::vector<MatmulJob> quantised;
  for (const MatmulJob& j : jobs) {
    checkWeight(j.w, "matmul");
    if (j.n_tokens <= 0) continue;
    if (quantised_activations_ && quant::activationFormat(j.w.type) != quant::ActivationFormat::None)
      quantised.push_back(j);
    else
      matmul(j.w, j.x, j.y, j.n_tokens);
  }
  if (!quantised.empty()) matmulQuantized(quantised);
}

void CpuBackend::matmulQuantized(std::span<const MatmulJob> jobs) {
  // Per job: where its quantised activations are (jobs with the same input share
  // them) and its range of work items (row tile x token block) in one loop.
  struct Part {
    size_t act = 0;  // offset in act_buf
    size_t act_bytes = 0;
    bool quantises = false;
    int64_t row_tiles = 0, first_item = 0;
  };
  std::vector<Part> parts(jobs.size());
  size_t act_total = 0;
  int64_t items = 0, to_quantise = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    Part& p = parts[i];
    const auto format = quant::activationFormat(j.w.type);
    p.act_bytes = quant::activationRowBytes(format, j.w.cols);
    p.quantises = true;
    for (size_t k = 0; k < i; ++k)
      if (jobs[k].x == j.x && jobs[k].n_tokens == j.n_tokens && jobs[k].w.cols == j.w.cols &&
          quant::activationFormat(jobs[k].w.type) == format) {
        p.act = parts[k].act;
        p.quantises = false;
        break;
      }
    if (p.quantises) {
      p.act = act_total;
      act_total += p.act_bytes * j.n_tokens;
      to_quantise += j.n_tokens;
    }
    p.row_tiles = (j.w.rows + kQuantRowTile - 1) / kQuantRowTile;
    p.first_item = items;
    items += p.row_tiles * ((j.n_tokens + kQuantTokenBlock - 1) / kQuantTokenBlock);
  }
  // The calling thread's buffer: the pool's workers only read it during this call.
  thread_local std::vector<uint8_t> act_buf;
  if (act_buf.size() < act_total) act_buf.resize(act_total);
  uint8_t* act = act_buf.data();
  std::vector<std::pair<size_t, int>> rows_to_quantise;  // (job, token)
  rows_to_quantise.reserve(static_cast<size_t>(to_quantise));
  for (size_t i = 0; i < jobs.size(); ++i)
    if (parts[i].quantises)
      for (int t = 0; t < jobs[i].n_tokens; ++t) rows_to_quantise.emplace_back(i, t);
  forEach(to_quantise, jobs[0].w.cols * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const auto [i, t] = rows_to_quantise[static_cast<size_t>(r)];
      const MatmulJob& j = jobs[i];
      quant::quantizeActivations(isa_, quant::activationFormat(j.w.type),
                                 j.x + static_cast<size_t>(t) * j.w.cols, j.w.cols,
                                 act + parts[i].act + static_cast<size_t>(t) * parts[i].act_bytes);
    }
  });
  const MatmulJob& j0 = jobs[0];
  const int64_t work = kQuantRowTile * j0.w.cols * std::min(j0.n_tokens, kQuantTokenBlock);
  forEach(items, work, [&](int64_t begin, int64_t end) {
    size_t i = 0;
    for (int64_t item = begin; item < end; ++item) {
      while (i + 1 < parts.size() && parts[i + 1].first_item <= item) ++i;
      const MatmulJob& j = jobs[i];
      const Part& p = parts[i];
      const WeightView& w = j.w;
      // Consecutive items share a token block, so a thread's rows meet activations in cache.
      const int64_t local = item - p.first_item;
      const int64_t r0 = (local % p.row_tiles) * kQuantRowTile;
      const int t0 = static_cast<int>(local / p.row_tiles) * kQuantTokenBlock;
      const int nr = static_cast<int>(std::min(kQuantRowTile, w.rows - r0));
      const int nt = std::min(kQuantTokenBlock, j.n_tokens - t0);
      const uint8_t* xt = act + p.act + static_cast<size_t>(t0) * p.act_bytes;
      float* yt = j.y + static_cast<size_t>(t0) * w.rows + r0;
      if (w.interleaved()) {  // whole groups: kQuantRowTile and w.rows are multiples of kRowGroup
        quant::dotGroups(isa_, w.type, w.data + static_cast<size_t>(r0 / quant::kRowGroup) * w.group_bytes,
                         w.group_bytes, nr / quant::kRowGroup, xt, p.act_bytes, nt, w.cols, yt,
                         static_cast<size_t>(w.rows));
      } else if (repack_ && nt >= kRepackTileTokens && nr % quant::kRowGroup == 0 &&
                 quant::isRepackable(w.type)) {
        thread_local std::vector<uint8_t> tile;  // [nr / kRowGroup] groups of this item's rows
        const size_t group_bytes = quant::repackedGroupBytes(w.type, w.cols);
        const int groups = nr / quant::kRowGroup;
        if (tile.size() < group_bytes * static_cast<size_t>(groups))
          tile.resize(group_bytes * static_cast<size_t>(groups));
        for (int g = 0; g < groups; ++g)
          quant::repackRows(w.type, w.data + static_cast<size_t>(r0 + g * quant::kRowGroup) * w.row_bytes,
                            w.row_bytes, w.cols, tile.data() + static_cast<size_t>(g) * group_bytes);
        quant::dotGroups(isa_, w.type, tile.data(), group_bytes, groups, xt, p.act_bytes, nt, w.cols, yt,
                         static_cast<size_t>(w.rows));
      } else {
        quant::dotTile(isa_, w.type, w.data + static_cast<size_t>(r0) * w.row_bytes, w.row_bytes, nr, xt,
                       p.act_bytes, nt, w.cols, yt, static_cast<size_t>(w.rows));
      }
    }
  });
}

void CpuBackend::matmulOneToken(const WeightView& w, const float* x,
                                float* y) {  // x: [cols]; y: [rows]
  forEach(w.rows, w.cols, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      y[r] = quant::dotRow(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, x, w.cols);
  });
}

void CpuBackend::matmulBatch(const WeightView& w, const float* x, float* y,
                             int n_tokens) {  // x: [n_tokens][cols]; y: [n_tokens][rows]
  // Each weight row is read (and dequantised) once for the whole batch. dotRow on
  // the dequantised F32 row gives exactly what dotRow on the encoded row gives, so
  // results equal n_tokens one-token calls.
  const int64_t tiles = (w.rows + kRowTile - 1) / kRowTile;
  forEach(tiles, kRowTile * w.cols * n_tokens, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    const bool plain_f32 = w.type == TensorType::F32;
    float* rows = plain_f32 ? nullptr : scratch(buf, static_cast<size_t>(kRowTile * w.cols));
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kRowTile;
      const int64_t nr = std::min(kRowTile, w.rows - r0);
      const float* wrows = reinterpret_cast<const float*>(w.data + static_cast<size_t>(r0) * w.row_bytes);
      if (!plain_f32) {
        for (int64_t i = 0; i < nr; ++i)
          quant::dequantizeRow(w.type, w.data + static_cast<size_t>(r0 + i) * w.row_bytes, rows + i * w.cols,
                               w.cols);
        wrows = rows;
      }
      // F32 rows are contiguous with row_bytes == 4 * cols (GGUF rows are packed).
      const int64_t stride = plain_f32 ? static_cast<int64_t>(w.row_bytes / sizeof(float)) : w.cols;
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = x + static_cast<size_t>(t) * w.cols;
        float* yt = y + static_cast<size_t>(t) * w.rows;
        for (int64_t i = 0; i < nr; ++i)
          yt[r0 + i] = quant::dotRow(TensorType::F32, reinterpret_cast<const uint8_t*>(wrows + i * stride),
                                     xt, w.cols);
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Activations

void CpuBackend::rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim,
                         float eps) {  // x, y: [n_rows][dim]; weight: [dim] or nullptr
  forEach(n_rows, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      const double mean = sumSquares(xr, dim) / dim;
      const auto scale = static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
      if (weight)
        for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
      else
        for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale;
    }
  });
}

KvCache CpuBackend::allocKv(size_t n_elems) {
  if (kv_type_ != KvType::F16) return Backend::allocKv(n_elems);
  return {allocFloats((n_elems + 1) / 2), KvType::F16, n_elems};  // two halves per float's bytes
}

void CpuBackend::storeKv(const KvCache& dst, size_t first, const float* src, size_t n) {
  if (dst.type != KvType::F16) return Backend::storeKv(dst, first, src, n);
  if (first > dst.n_elems || n > dst.n_elems - first)
    throw std::out_of_range(name() + ": storeKv: elements " + std::to_string(first) + " + " +
                            std::to_string(n) + " past a cache of " + std::to_string(dst.n_elems));
  uint16_t* out = static_cast<uint16_t*>(dst.data) + first;
  forEach(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = quant::fp32ToFp16(src[i]);
  });
}

void CpuBackend::swiglu(const float* gate, const float* up, float* out, size_t n) {  // [n]
  forEach(static_cast<int64_t>(n), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];  // silu(g) * up
    }
  });
}

// gemma4's FFN activation: gelu in its tanh form (ggml_gelu; HF gelu_pytorch_tanh).
void CpuBackend::geglu(const float* gate, const float* up, float* out, size_t n) {  // [n]
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCoef = 0.044715f;
  forEach(static_cast<int64_t>(n), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoef * g * g))) * up[i];
    }
  });
}

void CpuBackend::scale(float* x, float s, size_t n) {  // [n]
  forEach(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] *= s;
  });
}

void CpuBackend::softcap(float* x, float cap, size_t n) {  // [n]
  forEach(static_cast<int64_t>(n), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = cap * std::tanh(x[i] / cap);
  });
}

void CpuBackend::add(float* y, const float* x, size_t n) {  // [n]
  forEach(static_cast<int64_t>(n), 1,
          [&](int64_t begin, int64_t end) { vec::add(y + begin, x + begin, end - begin); });
}

void CpuBackend::axpy(float* y, const float* x, float a, size_t n) {  // [n]
  forEach(static_cast<int64_t>(n), 1,
          [&](int64_t begin, int64_t end) { vec::addScaled(y + begin, x + begin, a, end - begin); });
}

std::unique_ptr<Backend> makeCpuBackend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace moe
