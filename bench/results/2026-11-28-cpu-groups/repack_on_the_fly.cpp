// One thread, 1024 x 2048: the time to repack 16-row tiles into groups, and the file
// layout's tiles (dotTile) against repack + dotGroups per 16-row tile, for 2..64
// tokens (best of 30): where CpuBackend's on-the-fly repacking starts to pay. Built
// like kernel_min_time.cpp (repository root, one line):
//   g++ -O2 -std=c++20 -I. bench/results/2026-11-28-cpu-groups/repack_on_the_fly.cpp
//       build/models/libmoechat_models.a -o /tmp/repack_on_the_fly -lpthread
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
int main() {
  const int rows = 1024, n = 2048;
  for (auto t : {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_K,
                 gguf::TensorType::Q5_K, gguf::TensorType::Q6_K}) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    const int ntmax = 64;
    std::vector<float> w(size_t(rows) * n), x(size_t(ntmax) * n);
    for (auto& v : w) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    const size_t rb = gguf::rowBytes(t, n);
    std::vector<uint8_t> q(rb * rows);
    for (int r = 0; r < rows; ++r) quant::quantizeRow(t, w.data() + size_t(r) * n, q.data() + r * rb, n);
    const size_t gb = quant::repackedGroupBytes(t, n);
    std::vector<uint8_t> tile(2 * gb);
    auto f = quant::activationFormat(t);
    const size_t ab = quant::activationRowBytes(f, n);
    std::vector<uint8_t> act(ab * ntmax);
    for (int i = 0; i < ntmax; ++i)
      quant::quantizeActivations(f, x.data() + size_t(i) * n, n, act.data() + i * ab);
    std::vector<float> y(size_t(rows) * ntmax);
    // repack alone
    double brep = 1e9;
    for (int it = 0; it < 50; ++it) {
      auto a = std::chrono::steady_clock::now();
      for (int r0 = 0; r0 < rows; r0 += 16)
        for (int g = 0; g < 2; ++g)
          quant::repackRows(t, q.data() + (r0 + 8 * g) * rb, rb, n, tile.data() + g * gb);
      brep = std::min(brep, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::printf("%-5s repack of 1024 rows: %.1f us (%.2f us per 16 rows)\n", gguf::tensorTypeName(t),
                brep * 1e6, brep * 1e6 / 64);
    for (int nt : {2, 4, 8, 16, 64}) {
      double b1 = 1e9, b2 = 1e9;
      for (int it = 0; it < 30; ++it) {
        auto a = std::chrono::steady_clock::now();
        for (int r0 = 0; r0 < rows; r0 += 16)
          quant::dotTile(quant::DotIsa::Avx512, t, q.data() + r0 * rb, rb, 16, act.data(), ab, nt, n,
                         y.data() + r0, rows);
        auto b = std::chrono::steady_clock::now();
        for (int r0 = 0; r0 < rows; r0 += 16) {
          for (int g = 0; g < 2; ++g)
            quant::repackRows(t, q.data() + (r0 + 8 * g) * rb, rb, n, tile.data() + g * gb);
          quant::dotGroups(quant::DotIsa::Avx512, t, tile.data(), gb, 2, act.data(), ab, nt, n, y.data() + r0,
                           rows);
        }
        auto c = std::chrono::steady_clock::now();
        b1 = std::min(b1, std::chrono::duration<double>(b - a).count());
        b2 = std::min(b2, std::chrono::duration<double>(c - b).count());
      }
      std::printf("   nt=%2d rows %8.1f us  repack+groups %8.1f us  x%.2f\n", nt, b1 * 1e6, b2 * 1e6,
                  b1 / b2);
    }
  }
}
