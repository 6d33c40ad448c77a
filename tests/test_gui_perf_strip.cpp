// The live performance strip and the expert heat map: the figures derived from
// successive counter polls, what the labels say, the sparklines' history, and
// the heat map's cells; driven by scripted counters (no engine, no timing).
#include <QLabel>
#include <QSignalSpy>
#include <QTest>

#include "app/core/perf_figures.h"
#include "ui/expert_heat_map.h"
#include "ui/perf_strip.h"

using namespace moe;

class GuiPerfStripTest : public QObject {
  Q_OBJECT

 private slots:
  void figuresSplitLookupsOfTheInterval() {
    EngineCounters a, b;
    a.experts_resident = b.experts_resident = false;
    a.offload.expert_uses = 100;
    a.offload.ready_hits = 50;
    a.offload.prefetch_hits = 20;
    a.offload.misses = 40;
    a.offload.inflight_hits = 10;
    a.offload.bytes_h2d = 1'000'000'000;
    b = a;
    b.offload.expert_uses += 200;  // in the interval: 200 lookups
    b.offload.ready_hits += 120;   //   120 ready, of which 50 prefetched
    b.offload.prefetch_hits += 50;
    b.offload.inflight_hits += 30;
    b.offload.misses += 50;
    b.offload.bytes_h2d += 3'000'000'000;
    b.link_bytes_per_second = 24e9;
    b.blocked_seconds = a.blocked_seconds + 0.25;
    const auto f = derivePerfFigures(a, b, 0.5);
    QCOMPARE(f.expert_uses, uint64_t(200));
    QCOMPARE(f.cached_share, 70.0 / 200);
    QCOMPARE(f.prefetched_share, 50.0 / 200);
    QCOMPARE(f.inflight_share, 30.0 / 200);
    QCOMPARE(f.missed_share, 50.0 / 200);
    QCOMPARE(f.h2d_bytes_per_second, 6e9);
    QCOMPARE(f.link_share, 0.25);
    QCOMPARE(f.blocked_share, 0.5);
  }

  void replySpeedsComeFromTheReplyCounters() {
    EngineCounters c;
    c.generating = true;
    c.prefilled_tokens = 300;
    c.prefill_seconds = 1.5;
    c.generated_tokens = 41;
    c.decode_seconds = 2.0;  // from the first token: 40 more tokens
    c.ttft_seconds = 1.6;
    const auto f = derivePerfFigures(c, c, 0.25);
    QCOMPARE(f.prefill_tps, 200.0);
    QCOMPARE(f.decode_tps, 20.0);
    QCOMPARE(f.ttft_seconds, 1.6);
    QCOMPARE(f.expert_uses, uint64_t(0));
    QCOMPARE(f.h2d_bytes_per_second, 0.0);
  }

  void stripShowsPolledFigures() {
    EngineCounters c;
    c.experts_resident = false;
    c.link_bytes_per_second = 20e9;
    PerfStrip strip([&] { return c; });
    strip.resize(1000, 80);
    strip.pollNow();  // first poll: baseline
    c.generating = true;
    c.offload.expert_uses = 10;
    c.offload.ready_hits = 8;
    c.offload.prefetch_hits = 3;
    c.offload.misses = 2;
    c.prefilled_tokens = 50;
    c.prefill_seconds = 0.5;
    c.generated_tokens = 11;
    c.decode_seconds = 1.0;
    c.ttft_seconds = 0.6;
    strip.pollNow();
    const auto text = [&](const char* name) { return strip.findChild<QLabel*>(name)->text(); };
    QCOMPARE(text("perfExperts"), QString("80% hit · 30% prefetched · 20% missed"));
    QCOMPARE(text("perfPrefill"), QString("100 tok/s"));
    QCOMPARE(text("perfDecode"), QString("10.0 tok/s"));
    QCOMPARE(text("perfTtft"), QString("600 ms"));
    QVERIFY(text("perfPcie").startsWith("0.00 GB/s"));
    const auto sparks = strip.findChildren<Sparkline*>();
    QCOMPARE(sparks.size(), 9);
    // The hit-rate sparkline got one point (0.8) from the second poll.
    auto* hit_spark = strip.findChild<QWidget*>("perfExpertsTile")->findChild<Sparkline*>();
    QCOMPARE(hit_spark->values(), std::vector<double>{0.8});
  }

  // The strip leads with the figures every user reads (speed, first token, reading
  // speed, GPU memory, RAM); the expert-cache figures are one click away, and every
  // figure says in a tooltip what it is.
  void plainFiguresLeadAndTheCacheIsOneClickAway() {
    EngineCounters c;
    c.experts_resident = false;
    PerfStrip strip([&] { return c; });
    strip.resize(1200, 90);
    strip.show();
    QVERIFY(QTest::qWaitForWindowExposed(&strip));
    const QStringList plain = {"perfDecodeTile", "perfTtftTile", "perfPrefillTile", "perfVramTile",
                               "perfRamTile"};
    const QStringList detail = {"perfExpertsTile", "perfPredictorTile", "perfPcieTile", "perfBlockedTile"};
    auto visible = [&](const QString& name) { return strip.findChild<QWidget*>(name)->isVisible(); };
    for (const auto& n : plain) QVERIFY2(visible(n), qPrintable(n));
    for (const auto& n : detail) QVERIFY2(!visible(n), qPrintable(n));
    // In the strip's order: the plain figures first.
    int last_x = -1;
    for (const auto& n : plain) {
      const int x = strip.findChild<QWidget*>(n)->x();
      QVERIFY2(x > last_x, qPrintable(n));
      last_x = x;
    }
    QSignalSpy toggled(&strip, &PerfStrip::detailsToggled);
    strip.setDetailsShown(false);  // the program's own calls are not the user's choice
    QCOMPARE(toggled.count(), 0);
    QTest::mouseClick(strip.detailsButton(), Qt::LeftButton);
    QCOMPARE(toggled.count(), 1);
    QVERIFY(strip.detailsShown());
    for (const auto& n : detail) QVERIFY2(visible(n), qPrintable(n));
    for (const auto& n : plain + detail)
      QVERIFY2(!strip.findChild<QWidget*>(n)->toolTip().isEmpty(), qPrintable(n));

    // Memory: the GPU's in use of its total; "–" on the CPU; this process's RAM.
    const auto text = [&](const char* name) { return strip.findChild<QLabel*>(name)->text(); };
    c.ram_resident_bytes = 1'250'000'000;
    strip.pollNow();
    QCOMPARE(text("perfVram"), QString("–"));
    QCOMPARE(text("perfRam"), QString("1.3 GB"));
    c.vram_used_bytes = 13'400'000'000;
    c.vram_total_bytes = 25'700'000'000;
    c.ram_resident_bytes = 350'000'000;
    strip.pollNow();
    QCOMPARE(text("perfVram"), QString("13.4 / 25.7 GB"));
    QCOMPARE(text("perfRam"), QString("350 MB"));
  }

  void idleStripShowsTheLastReplyAsAWhole() {
    EngineCounters c;
    c.experts_resident = false;
    PerfStrip strip([&] { return c; });
    strip.pollNow();
    c.generating = true;  // reply starts: 10 lookups, 5 hits, predictor named 4 of 8, 2 in time
    c.offload.expert_uses = 10;
    c.offload.ready_hits = 5;
    c.offload.misses = 5;
    c.offload.pred_truth = 8;
    c.offload.pred_correct = 4;
    c.offload.pred_timely = 2;
    strip.pollNow();
    c.offload.expert_uses = 20;  // and 10 more, all hits
    c.offload.ready_hits = 15;
    strip.pollNow();
    QCOMPARE(strip.findChild<QLabel*>("perfExperts")->text(),
             QString("100% hit · 0% prefetched · 0% missed"));
    QCOMPARE(strip.findChild<QLabel*>("perfExpertsCaption")->text(),
             QString("Expert cache"));  // while it runs
    c.generating = false;
    strip.pollNow();
    strip.pollNow();  // idle: nothing moved
    QCOMPARE(strip.findChild<QLabel*>("perfExperts")->text(),
             QString("75% hit · 0% prefetched · 25% missed"));
    QCOMPARE(strip.findChild<QLabel*>("perfExpertsCaption")->text(), QString("Expert cache · last reply"));
    QCOMPARE(strip.findChild<QLabel*>("perfPredictor")->text(), QString("GoodPred 25% · accuracy 50%"));
    QCOMPARE(strip.findChild<QLabel*>("perfPredictorCaption")->text(), QString("Predictor · last reply"));
  }

  void aReplyBetweenTwoPollsIsStillTheLastReply() {
    EngineCounters c;
    c.experts_resident = false;
    c.offload.expert_uses = 100;  // an earlier reply
    c.offload.ready_hits = 100;
    PerfStrip strip([&] { return c; });
    strip.pollNow();
    c.offload.expert_uses = 110;  // a whole reply between two polls: 10 lookups, 4 hits
    c.offload.ready_hits = 104;
    c.offload.misses = 6;
    strip.pollNow();
    strip.pollNow();
    QCOMPARE(strip.findChild<QLabel*>("perfExperts")->text(),
             QString("40% hit · 0% prefetched · 60% missed"));
    QCOMPARE(strip.findChild<QLabel*>("perfExpertsCaption")->text(), QString("Expert cache · last reply"));
  }

  void residentModelSaysSo() {
    EngineCounters c;  // experts_resident by default, no lookups
    PerfStrip strip([&] { return c; });
    strip.pollNow();
    strip.pollNow();
    QCOMPARE(strip.findChild<QLabel*>("perfExperts")->text(), QString("all experts resident"));
    QCOMPARE(strip.findChild<QLabel*>("perfTtft")->text(), QString("–"));
  }

  void sparklineKeepsTheLastMinute() {
    Sparkline s(4);
    for (int i = 1; i <= 6; ++i) s.push(i);
    QCOMPARE(s.values(), (std::vector<double>{3, 4, 5, 6}));
    s.clear();
    QVERIFY(s.values().empty());
  }

  void heatMapPaintsTheResidency() {
    ExpertResidency r;
    r.n_layer = 2;
    r.n_expert = 3;
    using enum ExpertPlace;
    r.state = {kReady, kAbsent, kLoading, kAbsent, kReady, kReady};
    ExpertHeatMap map([&] { return r; });
    map.resize(300, 200);
    map.refresh();
    QCOMPARE(map.readyCount(), 3);
    const QImage img = map.grab().toImage();
    // Centre of layer 0 expert 0 (ready: green) vs layer 0 expert 1 (absent).
    const QColor ready = img.pixelColor(img.width() / 6, img.height() / 4);
    const QColor absent = img.pixelColor(img.width() / 2, img.height() / 4);
    QVERIFY2(ready.green() > ready.red() && ready != absent,
             qPrintable(ready.name() + " vs " + absent.name()));
  }
};

QTEST_MAIN(GuiPerfStripTest)
#include "test_gui_perf_strip.moc"
