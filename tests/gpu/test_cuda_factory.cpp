// makeBackend / cudaDeviceAvailable / prepareExperts, on whatever machine runs
// it: without a usable GPU (or a build without CUDA) "auto" must fall back to the
// CPU backend with a reason and "cuda" must fail naming it; with one, both give CUDA.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "inference/backend_factory.h"
#include "support/engine_fixture.h"
#include "synth/synthetic_model.h"

TEST(CudaFactory, cpuByName) {
  std::string why = "untouched";
  auto be = moe::makeBackend(moe::DeviceChoice::kCpu, 2, &why);
  EXPECT_EQ(be->device(), moe::Device::kCpu);
  EXPECT_EQ(why, "untouched");  // cpu asked for: no CUDA verdict
}

TEST(CudaFactory, autoAndCuda) {
  std::string reason;
  const bool gpu = moe::cudaDeviceAvailable(&reason);
  std::string why;
  auto any = moe::makeBackend(moe::DeviceChoice::kAuto, 2, &why);
  if (gpu) {
    EXPECT_EQ(any->device(), moe::Device::kCuda);
    EXPECT_EQ(moe::makeBackend(moe::DeviceChoice::kCuda, 2)->device(), moe::Device::kCuda);
    return;
  }
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(any->device(), moe::Device::kCpu);
  EXPECT_EQ(why, reason);
  try {
    moe::makeBackend(moe::DeviceChoice::kCuda, 2);
    ADD_FAILURE() << "makeBackend(\"cuda\") succeeded without a usable device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(CudaFactory, unknownName) { EXPECT_THROW(moe::parseDeviceChoice("tpu"), std::invalid_argument); }

// On the CPU backend preparing is the identity: the same views come back.
TEST(CudaFactory, prepareExpertsOnCpu) {
  EngineFixture fx(moe::synth::tinySpec("llama"));
  const auto& host = fx.model->hostExperts();
  const auto table = moe::prepareExperts(*fx.backend, host);
  ASSERT_EQ(table.size(), host.size());
  for (size_t l = 0; l < host.size(); ++l) {
    ASSERT_EQ(table[l].size(), host[l].size());
    for (size_t e = 0; e < host[l].size(); ++e) {
      EXPECT_EQ(table[l][e].gate.data, host[l][e].gate.data);
      EXPECT_EQ(table[l][e].down.data, host[l][e].down.data);
    }
  }
}
