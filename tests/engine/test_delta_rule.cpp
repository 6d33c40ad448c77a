// The gated delta rule's row kernel (inference/delta_rule_rows.h), the inner loop of
// qwen35moe's linear-attention layers on the CPU:
//   - every instruction set the CPU has gives the portable kernel's bits (the same
//     16 lanes, the same fused multiply-adds, the lanes added in the same order), for
//     rows a multiple of 16 wide and not, and row counts a multiple of the 4-row
//     group and not;
//   - the portable kernel is the recurrence: against a float64 version written here
//     over 24 tokens (the state carried), NMSE below 1e-10 (float sums of 128 terms
//     carry a relative error around 1e-7).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "inference/delta_rule_rows.h"
#include "support/test_log.h"

using moe::deltanet::DeltaRowsStep;
using moe::quant::DotIsa;

namespace {

struct Case {
  int n_rows, hk;
};

struct Inputs {
  std::vector<float> state, k, q, v;
  float decay = 0, beta = 0;
};

Inputs randomInputs(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.05f, 0.99f);
  Inputs in;
  in.state.resize(size_t(c.n_rows) * c.hk);
  for (float& x : in.state) x = 0.3f * normal(rng);
  in.k.resize(size_t(c.hk));
  in.q.resize(size_t(c.hk));
  for (float& x : in.k) x = normal(rng) / std::sqrt(float(c.hk));
  for (float& x : in.q) x = normal(rng) / std::sqrt(float(c.hk));
  in.v.resize(size_t(c.n_rows));
  for (float& x : in.v) x = normal(rng);
  in.decay = unit(rng);
  in.beta = unit(rng);
  return in;
}

// One step with `isa` on a copy of the inputs: the new state, then the outputs.
std::vector<float> step(DotIsa isa, const Case& c, const Inputs& in) {
  std::vector<float> state = in.state, out(size_t(c.n_rows));
  DeltaRowsStep s;
  s.state = state.data();
  s.n_rows = c.n_rows;
  s.hk = c.hk;
  s.k = in.k.data();
  s.q = in.q.data();
  s.v = in.v.data();
  s.decay = in.decay;
  s.beta = in.beta;
  s.out = out.data();
  moe::deltanet::deltaRows(isa, s);
  state.insert(state.end(), out.begin(), out.end());
  return state;
}

const Case kCases[] = {{128, 128}, {5, 128}, {7, 40}, {4, 16}, {1, 7}, {9, 33}};

}  // namespace

TEST(DeltaRule, everyInstructionSetGivesThePortableBits) {
  int checked = 0;
  for (DotIsa isa : {DotIsa::Avx2, DotIsa::Avx512}) {
    if (!moe::quant::dotIsaAvailable(isa)) {
      moe::test::info("%s: not on this CPU, not checked", moe::quant::dotIsaName(isa));
      continue;
    }
    for (const Case& c : kCases) {
      const Inputs in = randomInputs(c, uint32_t(c.n_rows * 1000 + c.hk));
      const std::vector<float> want = step(DotIsa::Portable, c, in), got = step(isa, c, in);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
          << moe::quant::dotIsaName(isa) << ": " << c.n_rows << " rows of " << c.hk;
    }
    ++checked;
  }
  moe::test::info("%d vector instruction sets checked against the portable kernel", checked);
}

TEST(DeltaRule, portableKernelIsTheRecurrence) {
  for (const Case& c : kCases) {
    Inputs in = randomInputs(c, 7u + uint32_t(c.hk));
    std::vector<double> state(in.state.begin(), in.state.end());
    std::mt19937 rng(99);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    double num = 0, den = 0;
    for (int t = 0; t < 24; ++t) {
      for (float& x : in.k) x = normal(rng) / std::sqrt(float(c.hk));
      for (float& x : in.q) x = normal(rng) / std::sqrt(float(c.hk));
      for (float& x : in.v) x = normal(rng);
      const std::vector<float> got = step(DotIsa::Portable, c, in);
      in.state.assign(got.begin(), got.begin() + ptrdiff_t(in.state.size()));
      for (int i = 0; i < c.n_rows; ++i) {
        double* row = state.data() + size_t(i) * c.hk;
        double sk = 0, oq = 0;
        for (int j = 0; j < c.hk; ++j) row[j] *= in.decay, sk += row[j] * in.k[size_t(j)];
        const double delta = (in.v[size_t(i)] - sk) * in.beta;
        for (int j = 0; j < c.hk; ++j) row[j] += in.k[size_t(j)] * delta, oq += row[j] * in.q[size_t(j)];
        const double d = double(got[in.state.size() + size_t(i)]) - oq;
        num += d * d;
        den += oq * oq;
      }
    }
    EXPECT_LT(num / den, 1e-10) << c.n_rows << " rows of " << c.hk;
  }
}
