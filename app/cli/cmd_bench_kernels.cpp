// bench --kernels: the CPU matmul kernels alone, against this machine's read
// bandwidth measured in the same run. Decode (one token) streams expert-shaped
// matrices from RAM, so its bound is bytes / bandwidth; prefill (a batch of tokens
// on one matrix) is compute-bound and is reported in multiply-adds per second. The
// baseline from the same run is the float-activation dot (quant::dotRow), the path
// quantised weights took before activations were quantised. The engine's rows run
// on the weights as the backend prepares them (Q8_0/Q4_0/K-quants repacked into interleaved
// groups unless --no-repack); their byte counts are of that layout.
//
// --backend cuda: the same matrices uploaded to the GPU and multiplied through the
// CUDA backend. Launches queue back to back and one synchronise ends each pass, so
// the host clock spans the device's work. The bound is the card's device-to-device
// copy rate measured in the same run (bytes read + written), the rate a kernel that
// reads its weights once approaches; the expert-sized default shape also shows what
// launch overhead costs a matrix this small.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "inference/cpu/thread_pool.h"
#include "inference/cuda_library.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "runtime/runtime.h"

namespace moe::cli {
namespace {

using gguf::TensorType;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best of `reps` timings of fn(), in seconds.
template <class Fn>
double bestOf(int reps, Fn&& fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, secondsSince(t0));
  }
  return best;
}

// Read bandwidth: every thread sums its share of a buffer far larger than the caches.
double measureReadGBs(ThreadPool& pool, size_t bytes) {
  std::vector<uint64_t> buf(bytes / sizeof(uint64_t));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  std::atomic<uint64_t> checksum{0};  // keeps the loads alive
  const int64_t chunks = pool.threads() * 16;
  const size_t per = buf.size() / chunks;
  const double s = bestOf(5, [&] {
    pool.parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
      uint64_t acc[8] = {};
      for (int64_t c = b; c < e; ++c) {
        const uint64_t* p = buf.data() + c * per;
        for (size_t i = 0; i + 8 <= per; i += 8)
          for (int l = 0; l < 8; ++l) acc[l] += p[i + l];
      }
      uint64_t total = 0;
      for (uint64_t a : acc) total += a;
      checksum.fetch_add(total, std::memory_order_relaxed);
    });
  });
  volatile uint64_t sink = checksum.load();
  (void)sink;
  return static_cast<double>(per * chunks * sizeof(uint64_t)) / s / 1e9;
}

struct KernelResult {
  TensorType type;
  bool repacked = false;
  double decode_gbs = 0, baseline_gbs = 0, prefill_gmacs = 0, baseline_prefill_gmacs = 0;
};

// `count` copies of one random matrix of the type, back to back: a decode pass over
// them all reads count * bytes from RAM, like the experts of a layer.
struct MatrixSet {
  std::vector<uint8_t> bytes;
  WeightView first;
  int count = 0;
  WeightView at(int i) const {
    WeightView w = first;
    w.data = bytes.data() + static_cast<size_t>(i) * first.bytes();
    return w;
  }
};

MatrixSet makeMatrices(TensorType t, int rows, int cols, size_t total_bytes) {
  MatrixSet m;
  const size_t row_bytes = gguf::rowBytes(t, cols);
  const size_t one = row_bytes * rows;
  m.count = static_cast<int>(std::max<size_t>(1, total_bytes / one));
  m.bytes.resize(one * m.count);
  std::vector<float> values(cols);
  uint32_t state = 12345;
  for (int r = 0; r < rows; ++r) {
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(static_cast<int32_t>(state >> 8) % 2001 - 1000) / 1000.0f;
    }
    quant::quantizeRow(t, values.data(), m.bytes.data() + r * row_bytes, cols);
  }
  for (int i = 1; i < m.count; ++i) std::memcpy(m.bytes.data() + i * one, m.bytes.data(), one);
  m.first = WeightView{t, m.bytes.data(), cols, rows, row_bytes};
  return m;
}

KernelResult benchType(CpuBackend& be, ThreadPool& pool, TensorType t, int rows, int cols, int batch,
                       size_t set_bytes) {
  KernelResult r{t};
  const MatrixSet m = makeMatrices(t, rows, cols, set_bytes);
  std::vector<float> x(static_cast<size_t>(batch) * cols), y(static_cast<size_t>(batch) * rows);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 2001) / 1000.0f - 1.0f;
  std::vector<WeightView> engine;  // the matrices as the backend prepares them
  for (int i = 0; i < m.count; ++i) engine.push_back(be.prepareWeight(m.at(i)));
  r.repacked = engine[0].interleaved();
  const double decode_s = bestOf(3, [&] {
    for (const WeightView& w : engine) be.matmul(w, x.data(), y.data(), 1);
  });
  r.decode_gbs = static_cast<double>(engine[0].bytes()) * m.count / decode_s / 1e9;
  const double total = static_cast<double>(m.first.bytes()) * m.count;
  // The float-activation dot over the same matrices, on the same threads.
  const double base_s = bestOf(2, [&] {
    for (int i = 0; i < m.count; ++i) {
      const WeightView w = m.at(i);
      pool.parallelFor(w.rows, 16, [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row)
          y[row] = quant::dotRow(t, w.data + row * w.row_bytes, x.data(), w.cols);
      });
    }
  });
  r.baseline_gbs = total / base_s / 1e9;
  // Prefill: one matrix (cache-resident after the first pass), `batch` tokens.
  const double macs = static_cast<double>(rows) * cols * batch;
  const double prefill_s = bestOf(3, [&] { be.matmul(engine[0], x.data(), y.data(), batch); });
  r.prefill_gmacs = macs / prefill_s / 1e9;
  const double base_prefill_s = bestOf(1, [&] {
    pool.parallelFor(rows, 4, [&](int64_t b, int64_t e) {
      for (int tok = 0; tok < batch; ++tok)
        for (int64_t row = b; row < e; ++row)
          y[tok * rows + row] =
              quant::dotRow(t, m.first.data + row * m.first.row_bytes, x.data() + tok * cols, cols);
    });
  });
  r.baseline_prefill_gmacs = macs / base_prefill_s / 1e9;
  for (const WeightView& w : engine) be.releaseWeight(w);
  return r;
}

// The device's copy rate: one buffer copied into another, bytes read + written.
double measureDeviceCopyGBs(Backend& be, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  float* a = be.allocFloats(n);
  float* b = be.allocFloats(n);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 9973);
  be.fromHost(a, host.data(), n);
  be.copy(b, a, n);
  be.synchronize();
  const double s = bestOf(5, [&] {
    be.copy(b, a, n);
    be.synchronize();
  });
  be.freeFloats(a);
  be.freeFloats(b);
  return 2.0 * static_cast<double>(n * sizeof(float)) / s / 1e9;
}

KernelResult benchTypeOnDevice(Backend& be, TensorType t, int rows, int cols, int batch, size_t set_bytes) {
  KernelResult r{t};
  const MatrixSet m = makeMatrices(t, rows, cols, set_bytes);
  std::vector<WeightView> dev;
  for (int i = 0; i < m.count; ++i) dev.push_back(be.prepareWeight(m.at(i)));
  std::vector<float> hx(static_cast<size_t>(batch) * cols);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>((i * 7919) % 2001) / 1000.0f - 1.0f;
  float* x = be.allocFloats(hx.size());
  float* y = be.allocFloats(static_cast<size_t>(batch) * rows);
  be.fromHost(x, hx.data(), hx.size());
  auto decode = [&] {
    for (const WeightView& w : dev) be.matmul(w, x, y, 1);
    be.synchronize();
  };
  decode();  // warm-up: first launches, scratch buffers
  r.decode_gbs = static_cast<double>(dev[0].bytes()) * m.count / bestOf(3, decode) / 1e9;
  constexpr int kPrefillReps = 10;
  auto prefill = [&] {
    for (int i = 0; i < kPrefillReps; ++i) be.matmul(dev[i % dev.size()], x, y, batch);
    be.synchronize();
  };
  prefill();
  r.prefill_gmacs = static_cast<double>(rows) * cols * batch * kPrefillReps / bestOf(3, prefill) / 1e9;
  be.freeFloats(x);
  be.freeFloats(y);
  for (const WeightView& w : dev) be.releaseWeight(w);
  return r;
}

quant::DotIsa parseIsa(const std::string& s) {
  for (quant::DotIsa isa : {quant::DotIsa::Portable, quant::DotIsa::Avx2, quant::DotIsa::Avx512})
    if (s == quant::dotIsaName(isa)) return isa;
  throw UsageError("--isa must be portable, avx2 or avx512-vnni");
}

int runDeviceKernels(const Args& args, DeviceChoice device, const std::vector<TensorType>& types, int rows,
                     int cols, int batch, int set_mb, int bw_mb) {
  Compute compute({device, args.intOr("--threads", 0)});
  Backend& be = compute.backend();
  const bool json = args.flag("--json");
  // On the CPU stand-in of the CUDA runtime the kernels run as fibers: its times say nothing about a GPU.
  const CudaLibraryApi* library = cudaLibrary();
  const bool meaningful = library && library->timings_meaningful;
  const double bw = measureDeviceCopyGBs(be, size_t(bw_mb) << 20);
  if (!json) {
    std::printf("device: %s; copy %.0f GB/s (bytes read + written, %d MiB, best of 5)\n", be.name().c_str(),
                bw, bw_mb);
    std::printf("decode: one token through %d x %d matrices, %d MiB of them\n", rows, cols, set_mb);
    std::printf("prefill: %d tokens on one %d x %d matrix\n\n", batch, rows, cols);
    if (!meaningful)
      std::printf("note: the CPU stand-in of the CUDA runtime ran these: times mean nothing\n");
    std::printf("%-7s %12s %8s %16s\n", "type", "decode GB/s", "of copy", "prefill GMAC/s");
  }
  std::string out = "{\"machine\": \"" + be.name() + "\", \"copy_gbs\": " + std::to_string(bw) +
                    ", \"rows\": " + std::to_string(rows) + ", \"cols\": " + std::to_string(cols) +
                    ", \"batch\": " + std::to_string(batch) + ", \"set_mb\": " + std::to_string(set_mb) +
                    ", \"timings_meaningful\": " + (meaningful ? "true" : "false") + ", \"kernels\": [";
  for (size_t i = 0; i < types.size(); ++i) {
    const KernelResult r = benchTypeOnDevice(be, types[i], rows, cols, batch, size_t(set_mb) << 20);
    const char* name = gguf::tensorTypeName(r.type);
    if (!json)
      std::printf("%-7s %12.1f %7.0f%% %16.1f\n", name, r.decode_gbs, 100.0 * r.decode_gbs / bw,
                  r.prefill_gmacs);
    char item[256];
    std::snprintf(
        item, sizeof item,
        "%s{\"type\": \"%s\", \"decode_gbs\": %.2f, \"decode_of_copy\": %.3f, \"prefill_gmacs\": %.2f}",
        i ? ", " : "", name, r.decode_gbs, r.decode_gbs / bw, r.prefill_gmacs);
    out += item;
  }
  out += "]}";
  if (json) std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace

int runBenchKernels(const std::vector<std::string>& argv) {
  const Args args(
      argv,
      {"--threads", "--isa", "--rows", "--cols", "--batch", "--set-mb", "--bw-mb", "--types", "--backend"},
      {"--kernels", "--json", "--no-repack"});
  const int rows = args.intOr("--rows", 1024), cols = args.intOr("--cols", 2048);
  const int batch = args.intOr("--batch", 64);
  const int set_mb = args.intOr("--set-mb", 1024), bw_mb = args.intOr("--bw-mb", 1024);
  if (rows < 1 || cols < 256 || cols % 256 || batch < 1 || set_mb < 1 || bw_mb < 1)
    throw UsageError("--rows >= 1, --cols a multiple of 256, --batch >= 1, --set-mb and --bw-mb >= 1");
  DeviceChoice device = DeviceChoice::kCpu;
  try {
    device = parseDeviceChoice(args.valueOr("--backend", "cpu"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  std::vector<TensorType> types = {TensorType::F16,  TensorType::Q8_0, TensorType::Q4_0,
                                   TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  if (auto list = args.value("--types")) {
    types.clear();
    size_t start = 0;
    while (start <= list->size()) {
      const size_t end = std::min(list->find(',', start), list->size());
      const std::string name = list->substr(start, end - start);
      bool found = false;
      for (TensorType t : quant::kComputeTypes)
        if (name == gguf::tensorTypeName(t)) {
          types.push_back(t);
          found = true;
        }
      if (!found) throw UsageError("--types: unknown type '" + name + "'");
      start = end + 1;
    }
  }
  const bool json = args.flag("--json");
  if (device != DeviceChoice::kCpu)
    return runDeviceKernels(args, device, types, rows, cols, batch, set_mb, bw_mb);
  CpuBackend be(args.intOr("--threads", 0));
  if (auto isa = args.value("--isa")) be.setDotIsa(parseIsa(*isa));
  be.setRepackWeights(!args.flag("--no-repack"));
  ThreadPool pool(be.threads());
  const double bw = measureReadGBs(pool, size_t{1} << 30);
  if (!json) {
    std::printf("machine: %s; read bandwidth %.1f GB/s (%d threads, 1 GiB, best of 5)\n", be.name().c_str(),
                bw, be.threads());
    std::printf("decode: one token through %d x %d matrices, %d MiB of them, read from RAM\n", rows, cols,
                set_mb);
    std::printf("prefill: %d tokens on one %d x %d matrix (in cache)\n\n", batch, rows, cols);
    std::printf("%-6s %-7s %12s %8s %14s %14s %16s\n", "type", "layout", "decode GB/s", "of bw",
                "f32-act GB/s", "prefill GMAC/s", "f32-act GMAC/s");
  }
  std::string out = "{\"machine\": \"" + be.name() + "\", \"threads\": " + std::to_string(be.threads()) +
                    ", \"read_gbs\": " + std::to_string(bw) + ", \"rows\": " + std::to_string(rows) +
                    ", \"cols\": " + std::to_string(cols) + ", \"batch\": " + std::to_string(batch) +
                    ", \"kernels\": [";
  for (size_t i = 0; i < types.size(); ++i) {
    const KernelResult r = benchType(be, pool, types[i], rows, cols, batch, size_t(set_mb) << 20);
    const char* name = gguf::tensorTypeName(r.type);
    if (!json)
      std::printf("%-6s %-7s %12.1f %7.0f%% %14.1f %14.1f %16.1f\n", name, r.repacked ? "groups" : "rows",
                  r.decode_gbs, 100.0 * r.decode_gbs / bw, r.baseline_gbs, r.prefill_gmacs,
                  r.baseline_prefill_gmacs);
    char item[384];
    std::snprintf(
        item, sizeof item,
        "%s{\"type\": \"%s\", \"layout\": \"%s\", \"decode_gbs\": %.2f, \"decode_of_bandwidth\": %.3f, "
        "\"f32_activation_decode_gbs\": %.2f, \"prefill_gmacs\": %.2f, \"f32_activation_prefill_gmacs\": "
        "%.2f}",
        i ? ", " : "", name, r.repacked ? "groups" : "rows", r.decode_gbs, r.decode_gbs / bw, r.baseline_gbs,
        r.prefill_gmacs, r.baseline_prefill_gmacs);
    out += item;
  }
  out += "]}";
  if (json) std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace moe::cli
