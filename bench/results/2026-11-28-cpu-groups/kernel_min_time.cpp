// One thread's best of 200 passes of dotTile (file layout) and dotGroups (interleaved
// row groups) over the same 1024 x 2048 matrix (in cache), alternating, for 1 token
// or argv[1] tokens; "same=1": every output equal. Built against a build tree, from
// the repository root (one line):
//   g++ -O2 -std=c++20 -I. bench/results/2026-11-28-cpu-groups/kernel_min_time.cpp
//       build/models/libmoechat_models.a -o /tmp/kernel_min_time -lpthread
//   /tmp/kernel_min_time 1; /tmp/kernel_min_time 4
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "models/gguf.h"
#include "models/quant.h"
#include "models/quant_dot.h"
#include "models/quant_repack.h"
using namespace moe;
int main(int argc, char** argv) {
  const int rows = 1024, n = 2048;
  int nt = argc > 1 ? atoi(argv[1]) : 1;
  for (auto t :
       {gguf::TensorType::Q8_0, gguf::TensorType::Q4_K, gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    std::vector<float> w(size_t(rows) * n), x(size_t(nt) * n);
    for (auto& v : w) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    const size_t rb = gguf::rowBytes(t, n);
    std::vector<uint8_t> q(rb * rows);
    for (int r = 0; r < rows; ++r) quant::quantizeRow(t, w.data() + size_t(r) * n, q.data() + r * rb, n);
    const size_t gb = quant::repackedGroupBytes(t, n);
    std::vector<uint8_t> g(gb * rows / 8);
    for (int i = 0; i < rows / 8; ++i) quant::repackRows(t, q.data() + 8 * i * rb, rb, n, g.data() + i * gb);
    auto f = quant::activationFormat(t);
    const size_t ab = quant::activationRowBytes(f, n);
    std::vector<uint8_t> act(ab * nt);
    for (int i = 0; i < nt; ++i)
      quant::quantizeActivations(f, x.data() + size_t(i) * n, n, act.data() + i * ab);
    std::vector<float> y1(size_t(rows) * nt), y2(size_t(rows) * nt);
    double best1 = 1e9, best2 = 1e9;
    for (int it = 0; it < 200; ++it) {
      auto a = std::chrono::steady_clock::now();
      quant::dotTile(quant::DotIsa::Avx512, t, q.data(), rb, rows, act.data(), ab, nt, n, y1.data(), rows);
      auto b = std::chrono::steady_clock::now();
      quant::dotGroups(quant::DotIsa::Avx512, t, g.data(), gb, rows / 8, act.data(), ab, nt, n, y2.data(),
                       rows);
      auto c = std::chrono::steady_clock::now();
      best1 = std::min(best1, std::chrono::duration<double>(b - a).count());
      best2 = std::min(best2, std::chrono::duration<double>(c - b).count());
    }
    const double macs = double(rows) * n * nt;
    std::printf(
        "%-5s nt=%d rows: %7.1f us %6.1f GB/s %6.1f GMAC/s | groups: %7.1f us %6.1f GB/s %6.1f GMAC/s | "
        "same=%d\n",
        gguf::tensorTypeName(t), nt, best1 * 1e6, q.size() / best1 / 1e9, macs / best1 / 1e9, best2 * 1e6,
        g.size() / best2 / 1e9, macs / best2 / 1e9, int(y1 == y2));
  }
}
