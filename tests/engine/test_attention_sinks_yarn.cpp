// The operations gpt-oss adds to the CPU backend, each against a double-precision
// implementation written here from its definition: attention within a sliding
// window and with per-head sink logits, YaRN-scaled RoPE (ggml's formulas:
// ggml_rope_yarn_corr_dims, rope_yarn_ramp, the mscale 1 + 0.1 ln factor), and the
// clamped SwiGLU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

#include "inference/backend.h"
#include "support/test_log.h"

using namespace moe;

namespace {

std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// q: [T][H][D], k/v: [ctx][Hkv][D]; window 0: all earlier keys; sinks: [H] or empty.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int pos0, int T, int H, int Hkv, int D, int window,
                              const std::vector<float>& sinks) {
  std::vector<double> out(size_t(T) * H * D, 0.0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int kvh = h / (H / Hkv), pos = pos0 + t;
      std::vector<double> w(pos + 1, 0.0);
      double mx = sinks.empty() ? -1e300 : sinks[h];
      for (int j = 0; j <= pos; ++j) {
        if (window > 0 && pos - j >= window) continue;
        double d = 0;
        for (int i = 0; i < D; ++i)
          d += double(q[(size_t(t) * H + h) * D + i]) * k[(size_t(j) * Hkv + kvh) * D + i];
        w[j] = d / std::sqrt(double(D));
        mx = std::max(mx, w[j]);
      }
      double sum = sinks.empty() ? 0.0 : std::exp(sinks[h] - mx);
      for (int j = 0; j <= pos; ++j)
        if (!(window > 0 && pos - j >= window)) sum += (w[j] = std::exp(w[j] - mx));
      for (int j = 0; j <= pos; ++j) {
        if (window > 0 && pos - j >= window) continue;
        for (int i = 0; i < D; ++i)
          out[(size_t(t) * H + h) * D + i] += w[j] / sum * v[(size_t(j) * Hkv + kvh) * D + i];
      }
    }
  return out;
}

}  // namespace

namespace {

void checkWindowAndSinks(int window, bool with_sinks, int pos0, int n_tokens) {
  const int H = 4, Hkv = 2, D = 16, ctx = pos0 + n_tokens;
  auto be = makeCpuBackend(2);
  const auto q = randomFloats(size_t(n_tokens) * H * D, 1, -2.0f, 2.0f);
  const auto k = randomFloats(size_t(ctx) * Hkv * D, 2, -2.0f, 2.0f);
  const auto v = randomFloats(size_t(ctx) * Hkv * D, 3);
  const std::vector<float> sinks =
      with_sinks ? std::vector<float>{2.0f, -1.0f, 0.5f, 4.0f} : std::vector<float>{};
  AttentionShape shape{H, Hkv, D, 1.0f / std::sqrt(float(D))};
  shape.window = window;
  shape.sinks = with_sinks ? sinks.data() : nullptr;
  std::vector<float> kc(k), vc(v);
  const KvCache kk{kc.data(), KvType::F32, kc.size()}, vv{vc.data(), KvType::F32, vc.size()};
  std::vector<float> out(q.size(), NAN);
  be->attention(q.data(), kk, vv, pos0, n_tokens, shape, out.data());
  const double err = maxAbsDiff(out, reference(q, k, v, pos0, n_tokens, H, Hkv, D, window, sinks));
  ASSERT_TRUE(err < 1e-5) << moe::test::format("%g", err);
  if (window > 0 || with_sinks) {  // the variant changes the result
    const double plain = maxAbsDiff(out, reference(q, k, v, pos0, n_tokens, H, Hkv, D, 0, {}));
    ASSERT_TRUE(plain > 1e-3 || (window >= ctx && !with_sinks));
  }
}

}  // namespace

TEST(AttentionSinksYarn, windowAndSinks) {
  for (int window : {0, 1, 5, 16})
    for (bool sinks : {false, true})
      for (auto [p0, nt] : {std::pair{0, 9}, {12, 1}, {30, 4}}) {
        SCOPED_TRACE(moe::test::format("window %d sinks %d p%d t%d", window, int(sinks), p0, nt));
        checkWindowAndSinks(window, sinks, p0, nt);
      }
}

TEST(AttentionSinksYarn, yarnRope) {
  // gpt-oss-20b's values: head_dim 64, base 150000, factor 32 over 4096 positions.
  const int T = 5, H = 3, D = 64, n_rot = 64;
  const float base = 150000.0f;
  RopeYarn yarn;
  yarn.factor = 32.0f;
  yarn.orig_ctx = 4096;
  auto be = makeCpuBackend(1);
  auto x = randomFloats(size_t(T) * H * D, 7);
  const std::vector<int32_t> pos = {0, 1, 17, 900, 70000};
  // The band: corr(beta) = n_rot ln(4096 / (2 pi beta)) / (2 ln 150000).
  auto corr = [&](double beta) {
    return n_rot * std::log(4096 / (beta * 2 * std::numbers::pi)) / (2 * std::log(150000.0));
  };
  const double low = std::max(0.0, std::floor(corr(32))), high = std::min(n_rot - 1.0, std::ceil(corr(1)));
  ASSERT_DOUBLE_EQ(low, 8.0);
  ASSERT_DOUBLE_EQ(high, 18.0);
  std::vector<double> want(x.size());
  const double mscale = 1.0 + 0.1 * std::log(32.0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const float* xi = &x[(size_t(t) * H + h) * D];
      double* wo = &want[(size_t(t) * H + h) * D];
      for (int i = 0; i < D; ++i) wo[i] = xi[i];
      for (int i = 0; i < n_rot / 2; ++i) {  // neox pairs (i, i + 32)
        const double extrap = pos[t] * std::pow(150000.0, -2.0 * i / n_rot);
        const double ramp = 1.0 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
        const double theta = extrap / 32.0 * (1 - ramp) + extrap * ramp;
        const double c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
        wo[i] = xi[i] * c - xi[i + 32] * s;
        wo[i + 32] = xi[i] * s + xi[i + 32] * c;
      }
    }
  be->ropeYarn(x.data(), T, H, D, n_rot, pos.data(), base, RopeStyle::Neox, yarn);
  const double err = maxAbsDiff(x, want);
  ASSERT_TRUE(err < 1e-5) << moe::test::format("%g", err);
  RopeYarn bad = yarn;
  bad.orig_ctx = 0;
  ASSERT_THROW(be->ropeYarn(x.data(), T, H, D, n_rot, pos.data(), base, RopeStyle::Neox, bad),
               std::invalid_argument);
}

TEST(AttentionSinksYarn, clampedSwiglu) {
  auto be = makeCpuBackend(1);
  const std::vector<float> gate = {-20.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 50.0f, 3.0f};
  const std::vector<float> up = {1.0f, -9.0f, 2.0f, 8.0f, -7.5f, 0.25f, -1.0f, 7.0f};
  std::vector<float> out(gate.size());
  be->swigluClamped(gate.data(), up.data(), out.data(), gate.size(), 1.702f, 7.0f);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min(double(gate[i]), 7.0), u = std::clamp(double(up[i]), -7.0, 7.0);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    ASSERT_TRUE(std::fabs(out[i] - want) <= 1e-5 * std::max(1.0, std::fabs(want))) << i;
  }
}
