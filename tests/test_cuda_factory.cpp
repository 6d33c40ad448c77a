// makeBackend / cudaDeviceAvailable / prepareExperts, on whatever machine runs
// it: without a usable GPU (or a build without CUDA) "auto" must fall back to the
// CPU backend with a reason and "cuda" must fail naming it; with one, both give CUDA.
#include <QtTest/QtTest>

#include <stdexcept>
#include <string>

#include "engine_fixture.h"
#include "inference/backend_factory.h"
#include "models/synthetic_model.h"

class TestCudaFactory : public QObject {
  Q_OBJECT

 private slots:
  void cpuByName() {
    std::string why = "untouched";
    auto be = moe::makeBackend("cpu", 2, &why);
    QVERIFY(be->name().rfind("cpu", 0) == 0);
    QCOMPARE(why, std::string("untouched"));  // cpu asked for: no CUDA verdict
  }

  void autoAndCuda() {
    std::string reason;
    const bool gpu = moe::cudaDeviceAvailable(&reason);
    std::string why;
    auto any = moe::makeBackend("auto", 2, &why);
    if (gpu) {
      QVERIFY(any->name().rfind("cuda", 0) == 0);
      QVERIFY(moe::makeBackend("cuda", 2)->name().rfind("cuda", 0) == 0);
      return;
    }
    QVERIFY(!reason.empty());
#if !MOECHAT_HAVE_CUDA
    QCOMPARE(reason, std::string("built without CUDA"));
#endif
    QVERIFY(any->name().rfind("cpu", 0) == 0);
    QCOMPARE(why, reason);
    try {
      moe::makeBackend("cuda", 2);
      QFAIL("makeBackend(\"cuda\") succeeded without a usable device");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find(reason) != std::string::npos, e.what());
    }
  }

  void unknownName() { QVERIFY_THROWS_EXCEPTION(std::invalid_argument, moe::makeBackend("tpu", 1)); }

  // On the CPU backend preparing is the identity: the same views come back.
  void prepareExpertsOnCpu() {
    EngineFixture fx(moe::synth::tinySpec("llama"));
    const auto& host = fx.model->hostExperts();
    const auto table = moe::prepareExperts(*fx.backend, host);
    QCOMPARE(table.size(), host.size());
    for (size_t l = 0; l < host.size(); ++l) {
      QCOMPARE(table[l].size(), host[l].size());
      for (size_t e = 0; e < host[l].size(); ++e) {
        QVERIFY(table[l][e].gate.data == host[l][e].gate.data);
        QVERIFY(table[l][e].down.data == host[l][e].down.data);
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestCudaFactory)
#include "test_cuda_factory.moc"
