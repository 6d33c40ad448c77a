// The offload engine's expert source end to end on the CPU backend: host expert
// store -> transfer worker (its own thread) -> expert cache -> MoE block. Every
// policy and every ablation switch must compute bit-identical logits to the
// experts-in-place engine, over a batched prefill and token-by-token decode, at
// cache sizes from "everything fits" down to fewer slots than one token's experts.
#include <QtTest>

#include "engine_fixture.h"
#include "offload/cached_expert_source.h"
#include "offload/copy_engine.h"
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
    PrefetchOptions prefetch;
    prefetch.predictor = predict ? &skip_gate : nullptr;
    CachedExpertSource source(store, cache, worker, c.n_expert_used, prefetch);

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
};

QTEST_APPLESS_MAIN(CachedSourceTest)
#include "test_cached_source.moc"
