// TrainerRun, the predictor wizard pages' record of the trainer run they started:
// a run left by Back still reports its end later, and that report (and its
// progress) must not be taken for the page's next run.
#include <QtTest>

#include "ui/trainer_run.h"

using moe::TrainerRun;

class TrainerRunTest : public QObject {
  Q_OBJECT

 private slots:
  void aRunEndsOnce() {
    TrainerRun run;
    QVERIFY(!run.end());  // nothing runs: a stray report is ignored
    QVERIFY(run.start());
    QVERIFY(!run.start());  // one at a time
    QVERIFY(run.running() && run.showsProgress());
    QVERIFY(run.end());
    QVERIFY(!run.running());
    QVERIFY(!run.end());
  }

  void theEndOfARunLeftBehindIsNotTheNextRunsEnd() {
    TrainerRun run;
    QVERIFY(run.start());
    QVERIFY(run.leave());  // Back while it runs: asked to cancel
    QVERIFY(!run.running());
    QVERIFY(!run.leave());
    QVERIFY(run.start());           // the page is shown again before the old run ended
    QVERIFY(!run.showsProgress());  // the old run's progress still arrives first
    QVERIFY(!run.end());            // the old run's end
    QVERIFY(run.running() && run.showsProgress());
    QVERIFY(run.end());  // the new run's end
    QVERIFY(!run.running());
  }

  void twoRunsLeftBehindAreBothSkipped() {
    TrainerRun run;
    QVERIFY(run.start());
    QVERIFY(run.leave());
    QVERIFY(run.start());
    QVERIFY(run.leave());
    QVERIFY(run.start());
    QVERIFY(!run.end());
    QVERIFY(!run.end());
    QVERIFY(run.end());
  }
};

QTEST_GUILESS_MAIN(TrainerRunTest)
#include "test_trainer_run.moc"
