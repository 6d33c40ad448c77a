// The offload engine's expert source end to end on the CPU backend: host expert
// store -> transfer worker (its own thread) -> expert cache -> MoE block. Every
// policy and every ablation switch must compute bit-identical logits to the
// experts-in-place engine, over a batched prefill and token-by-token decode, at
// cache sizes from "everything fits" down to fewer slots than one token's experts.
#include <QtTest>

#include "engine_fixture.h"
#include "offload/cached_expert_source.h"
#include "offload/copy_engine.h"
#include "offload/offload_engine.h"
#include "offload/skip_gate_predictor.h"

using namespace moe;

namespace {

// Prefill of 10 tokens, then 6 decode steps: all logits concatenated.
std::vector<float> run(EngineFixture& f, ExpertSource& source) {
  auto t = f.transformer(64, &source);
  std::vector<float> all, step;
  const int32_t prompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61};
  t->forward(prompt, step, true);
  all = step;
  for (int32_t next : {5, 77, 12, 300, 2, 31}) {
    const int32_t one[] = {next % f.model->config().n_vocab};
    t->forward(one, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

synth::SyntheticSpec deepSpec() {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4
  spec.n_layer = 6;
  return spec;
}

}  // namespace

class CachedSourceTest : public QObject {
  Q_OBJECT
 private slots:
  void everyPolicyComputesTheSame_data() {
    QTest::addColumn<int>("cache_slots");
    QTest::addColumn<bool>("predict");
    QTest::addColumn<bool>("chunking");
    QTest::addColumn<bool>("preemption");
    QTest::addColumn<bool>("reordering");
    QTest::newRow("reactive, all experts fit") << -1 << false << true << true << true;
    QTest::newRow("reactive, 24 slots") << 24 << false << true << true << true;
    QTest::newRow("reactive, 3 slots (< experts per token)") << 3 << false << true << true << true;
    QTest::newRow("proactive skip-gate, 40 slots") << 40 << true << true << true << true;
    QTest::newRow("proactive skip-gate, 12 slots") << 12 << true << true << true << true;
    QTest::newRow("proactive, no chunking") << 24 << true << false << true << true;
    QTest::newRow("proactive, no early preemption") << 24 << true << true << false << true;
    QTest::newRow("proactive, no reordering") << 24 << true << true << true << false;
  }

  void everyPolicyComputesTheSame() {
    QFETCH(int, cache_slots);
    QFETCH(bool, predict);
    QFETCH(bool, chunking);
    QFETCH(bool, preemption);
    QFETCH(bool, reordering);
    EngineFixture f(deepSpec());
    const auto expected = run(f, *f.experts);

    const auto& c = f.model->config();
    HostExpertStore store(*f.model);
    const int n_slots = cache_slots < 0 ? c.n_layer * c.n_expert : cache_slots;
    ExpertCache cache(n_slots, store.expertBytes(), c.n_layer);
    HostCopyEngine link;
    OffloadMetrics metrics;
    TransferWorker worker(cache, store, link, metrics, TransferMode::kThreaded,
                          TransferOptions{chunking, preemption, reordering});
    SkipGatePredictor skip_gate(*f.model);
    SourcePolicy policy;
    policy.prefetch.predictor = predict ? &skip_gate : nullptr;
    CachedExpertSource source(store, cache, worker, metrics, c.n_expert_used, policy);

    const auto got = run(f, source);
    QVERIFY(got == expected);  // bit-identical

    worker.waitIdle();
    const auto m = metrics.snapshot();
    QVERIFY(m.expert_uses > 0);
    QCOMPARE(m.ready_hits + m.inflight_hits + m.misses, m.expert_uses);
    QVERIFY(m.unavailable <= m.misses);
    QCOMPARE(source.hostComputed(), m.unavailable);
    QCOMPARE(link.bytesCopied(), m.bytes_h2d);
    if (cache_slots < 0) QCOMPARE(m.unavailable, uint64_t(0));  // everything fits: nothing falls back
    if (!predict) QCOMPARE(m.prefetch_hits, uint64_t(0));
    qInfo(
        "%d slots, %s: uses %llu, ready %llu (prefetched %llu), in flight %llu, missed %llu "
        "(host-computed %llu), %.1f KB copied",
        n_slots, predict ? "skip-gate" : "reactive", (unsigned long long)m.expert_uses,
        (unsigned long long)m.ready_hits, (unsigned long long)m.prefetch_hits,
        (unsigned long long)m.inflight_hits, (unsigned long long)m.misses, (unsigned long long)m.unavailable,
        m.bytes_h2d / 1e3);
  }

  // Every policy of OffloadEngine (threaded worker, simulated link) and each of
  // proactive's switches off, at cache sizes from 2 slots (staging only) to all.
  // The CPU cost is chosen so that the cpu-experts rule really sends some misses
  // to the CPU: 1.5 expert copies' worth of link time.
  void everyEnginePolicyComputesTheSame_data() {
    QTest::addColumn<QString>("policy");
    QTest::addColumn<int>("cache_slots");
    QTest::addColumn<QString>("switch_off");
    for (OffloadPolicy p : allPolicies())
      for (int n_slots : {2, 3, 12, 40, 96})
        QTest::newRow(qPrintable(QString("%1, %2 slots").arg(QLatin1String(policyName(p))).arg(n_slots)))
            << QString(policyName(p)) << n_slots << QString();
    for (const char* off : {"prefetch", "chunking", "preemption", "reordering", "cpu-fallback", "streaming"})
      for (int n_slots : {3, 24})
        QTest::newRow(
            qPrintable(QString("proactive without %1, %2 slots").arg(QLatin1String(off)).arg(n_slots)))
            << QString("proactive") << n_slots << QString(off);
  }

  void everyEnginePolicyComputesTheSame() {
    QFETCH(QString, policy);
    QFETCH(int, cache_slots);
    QFETCH(QString, switch_off);
    EngineFixture f(deepSpec());
    const auto expected = run(f, *f.experts);
    OffloadConfig oc;
    oc.policy = parsePolicy(policy.toStdString());
    oc.cache_slots = cache_slots;
    const double expert_bytes = double(HostExpertStore(*f.model).expertBytes());
    oc.link.bytes_per_second = expert_bytes / 1e-3;
    oc.cpu_cost = {1.5e-3, 4e-3};
    ProactiveSwitches& sw = oc.switches;
    sw.prefetch = switch_off != "prefetch";
    sw.chunking = switch_off != "chunking";
    sw.early_preemption = switch_off != "preemption";
    sw.reordering = switch_off != "reordering";
    sw.cpu_fallback = switch_off != "cpu-fallback";
    sw.prefill_streaming = switch_off != "streaming";
    OffloadEngine engine(*f.model, *f.backend, oc);
    auto t = f.transformer(64, &engine.source());
    std::vector<float> got, step;
    const int32_t prompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61};
    t->forward(prompt, step, true);
    got = step;
    for (int32_t next : {5, 77, 12, 300, 2, 31}) {
      const int32_t one[] = {next % f.model->config().n_vocab};
      t->forward(one, step);
      got.insert(got.end(), step.begin(), step.end());
    }
    QVERIFY(got == expected);  // bit-identical

    engine.waitIdle();
    const auto m = engine.snapshot();
    if (oc.policy == OffloadPolicy::kResident) {
      QCOMPARE(m.expert_uses, uint64_t(0));
      return;
    }
    QCOMPARE(m.ready_hits + m.inflight_hits + m.misses, m.expert_uses);
    QVERIFY(m.unavailable + m.cpu_computed + m.streamed <= m.misses);
    QCOMPARE(engine.cachedSource()->hostComputed(), m.unavailable + m.cpu_computed);
    if (engine.cache()->stagingCount() > 0) QCOMPARE(m.unavailable, uint64_t(0));  // staging always streams
    if (oc.policy == OffloadPolicy::kStatic) QVERIFY(m.held_slots > 0 || cache_slots <= 2);
    qInfo(
        "%s%s%s, %d slots: uses %llu, ready %llu, in flight %llu, missed %llu (streamed %llu, CPU %llu, "
        "no slot %llu), %.1f KB",
        qPrintable(policy), switch_off.isEmpty() ? "" : " without ", qPrintable(switch_off), cache_slots,
        (unsigned long long)m.expert_uses, (unsigned long long)m.ready_hits,
        (unsigned long long)m.inflight_hits, (unsigned long long)m.misses, (unsigned long long)m.streamed,
        (unsigned long long)m.cpu_computed, (unsigned long long)m.unavailable, m.bytes_h2d / 1e3);
  }
};

QTEST_APPLESS_MAIN(CachedSourceTest)
#include "test_cached_source.moc"
