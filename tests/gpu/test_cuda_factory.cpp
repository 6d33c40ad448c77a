// makeBackend / cudaDeviceAvailable / prepareExperts, on whatever machine runs
// it: without a usable GPU (or a build without CUDA) "auto" must fall back to the
// CPU backend with a reason and "cuda" must fail naming it; with one, both give CUDA.

#include <stdexcept>
#include <string>

#include "engine_fixture.h"
#include "gpu/gpu_check.h"
#include "inference/backend_factory.h"
#include "models/synthetic_model.h"

TEST_CASE(cpuByName) {
  std::string why = "untouched";
  auto be = moe::makeBackend(moe::DeviceChoice::kCpu, 2, &why);
  CHECK(be->device() == moe::Device::kCpu);
  CHECK_EQ(why, std::string("untouched"));  // cpu asked for: no CUDA verdict
}

TEST_CASE(autoAndCuda) {
  std::string reason;
  const bool gpu = moe::cudaDeviceAvailable(&reason);
  std::string why;
  auto any = moe::makeBackend(moe::DeviceChoice::kAuto, 2, &why);
  if (gpu) {
    CHECK(any->device() == moe::Device::kCuda);
    CHECK(moe::makeBackend(moe::DeviceChoice::kCuda, 2)->device() == moe::Device::kCuda);
    return;
  }
  CHECK(!reason.empty());
  CHECK(any->device() == moe::Device::kCpu);
  CHECK_EQ(why, reason);
  try {
    moe::makeBackend(moe::DeviceChoice::kCuda, 2);
    FAIL("makeBackend(\"cuda\") succeeded without a usable device");
  } catch (const std::runtime_error& e) {
    CHECK_MSG(std::string(e.what()).find(reason) != std::string::npos, e.what());
  }
}

TEST_CASE(unknownName) { CHECK_THROWS(std::invalid_argument, moe::parseDeviceChoice("tpu")); }

// On the CPU backend preparing is the identity: the same views come back.
TEST_CASE(prepareExpertsOnCpu) {
  EngineFixture fx(moe::synth::tinySpec("llama"));
  const auto& host = fx.model->hostExperts();
  const auto table = moe::prepareExperts(*fx.backend, host);
  CHECK_EQ(table.size(), host.size());
  for (size_t l = 0; l < host.size(); ++l) {
    CHECK_EQ(table[l].size(), host[l].size());
    for (size_t e = 0; e < host[l].size(); ++e) {
      CHECK(table[l][e].gate.data == host[l][e].gate.data);
      CHECK(table[l][e].down.data == host[l][e].down.data);
    }
  }
}
GPU_CHECK_MAIN(TestCudaFactory)
