// The settings panel: the VRAM budget slider and number stay in step, the load plan
// of the demo model follows the budget, "auto" without a GPU says so (the demo's cache
// is labelled a simulation), and OK writes every field through AppSettings to a real
// INI file.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "app/core/fit_words.h"
#include "app/core/model_shape.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "app/qt/sampling_json.h"
#include "ui/settings_dialog.h"

using namespace moe;

namespace {

SettingsContext demoContext(quint64 gpu_bytes) {
  SettingsContext ctx;
  ctx.model = describeModel("", true);
  ctx.model_name = "Demo model";
  ctx.device.gpu = gpu_bytes > 0;
  ctx.device.free_bytes = ctx.device.total_bytes = gpu_bytes;
  ctx.demo = true;
  ctx.host_available_bytes = 8'000'000'000;
  ctx.n_ctx = 512;
  return ctx;
}

}  // namespace

class GuiSettingsTest : public QObject {
  Q_OBJECT

 private slots:
  void settingsRoundTripThroughAnIniFile() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.ini");
    {
      QSettings ini(path, QSettings::IniFormat);
      AppSettings s(ini);
      QSignalSpy offload(&s, &AppSettings::offloadChanged);
      s.setVramBudgetBytes(12'000'000'000);
      s.setCachePolicy("static");
      s.setCachePolicy("no-such-policy");  // ignored
      QCOMPARE(offload.count(), 2);
      s.setTheme("dark");
    }
    QSettings ini(path, QSettings::IniFormat);
    AppSettings s(ini);
    QCOMPARE(s.vramBudgetBytes(), quint64(12'000'000'000));
    QCOMPARE(s.cachePolicy(), QString("static"));
    QCOMPARE(s.theme(), QString("dark"));
  }

  void fitFollowsTheBudget() {
    QTemporaryDir dir;
    QSettings ini(dir.filePath("s.ini"), QSettings::IniFormat);
    AppSettings settings(ini);
    settings.setVramBudgetBytes(1'000'000'000);
    SettingsDialog dlg(settings, demoContext(24'000'000'000));
    auto* slider = dlg.findChild<QSlider*>("budgetSlider");
    auto* gb = dlg.findChild<QDoubleSpinBox*>("budgetGb");
    auto* fit = dlg.findChild<QLabel*>("fitEstimate");
    QVERIFY(slider && gb && fit);
    QCOMPARE(gb->value(), 1.0);
    QVERIFY2(fit->text().contains("Expert cache") || fit->text().contains("fit"), qPrintable(fit->text()));

    // The demo model is tiny: even a small budget holds all its experts.
    QVERIFY2(fit->text().contains("all") && fit->text().contains("no offloading"), qPrintable(fit->text()));

    // Keyboard on the slider moves the number with it.
    slider->setFocus();
    QTest::keyClick(slider, Qt::Key_Right);
    QCOMPARE(gb->value(), 1.25);
    QTest::keyClick(slider, Qt::Key_End);
    QCOMPARE(gb->value(), 24.0);
    // And the number moves the slider.
    gb->setValue(2.0);
    QCOMPARE(slider->value(), 8);
    QCOMPARE(dlg.budgetBytes(), quint64(2'000'000'000));
  }

  void tinyBudgetDoesNotFit() {
    QTemporaryDir dir;
    QSettings ini(dir.filePath("s.ini"), QSettings::IniFormat);
    AppSettings settings(ini);
    settings.setVramBudgetBytes(250'000'000);
    auto ctx = demoContext(24'000'000'000);
    ctx.n_ctx = 4096;
    // Pretend the demo model had 1000x the context: the KV cache alone no longer fits.
    ctx.model->config.n_ctx_train = 1 << 20;
    ctx.n_ctx = 1 << 20;
    SettingsDialog dlg(settings, ctx);
    QVERIFY2(dlg.fitText().contains("Does not fit"), qPrintable(dlg.fitText()));
    // The budget is below what stays on the GPU whatever it is: said so, with the figure,
    // not as "room for fewer than 2 expert slots".
    QVERIFY(dlg.shownPlan() && !dlg.shownPlan()->loads());
    const uint64_t fixed = dlg.shownPlan()->fit.fixedBytes();
    QVERIFY(fixed > 250'000'000);
    const QString need = QString::fromStdString(formatBytes(fixed));
    QVERIFY2(dlg.fitText().contains("need " + need + ", more than the 250.0 MB budget"),
             qPrintable(dlg.fitText()));
    QVERIFY2(!dlg.fitText().contains("fewer than 2"), qPrintable(dlg.fitText()));
  }

  void autoWithoutAGpuSaysSo() {
    QTemporaryDir dir;
    QSettings ini(dir.filePath("s.ini"), QSettings::IniFormat);
    AppSettings settings(ini);
    SettingsDialog dlg(settings, demoContext(0));
    QVERIFY(dlg.findChild<QCheckBox*>("autoBudget")->isChecked());
    // The demo model under auto on the CPU: half its experts in a simulated cache, said so.
    QVERIFY2(dlg.fitText().contains("No GPU in use") && dlg.fitText().contains("simulation in host memory"),
             qPrintable(dlg.fitText()));
    QCOMPARE(uint64_t(dlg.shownPlan()->cache_slots), dlg.shownPlan()->fit.total_experts / 2);
    QVERIFY(!dlg.findChild<QSlider*>("budgetSlider")->isEnabled());
    dlg.findChild<QCheckBox*>("autoBudget")->click();
    QVERIFY(dlg.findChild<QSlider*>("budgetSlider")->isEnabled());
    // A budget on the CPU plans for a card with that much memory: still a simulation.
    QVERIFY2(dlg.fitText().contains("planned for a card with 16.00 GB"), qPrintable(dlg.fitText()));
    QVERIFY(dlg.shownPlan()->simulated);
  }

  void numbersReadBackAreFiniteAndInRange() {
    QTemporaryDir dir;
    const QString path = dir.filePath("s.ini");
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(
          "[sampling]\ntemperature=nan\ntop_p=inf\nmin_p=-inf\nrepeat_penalty=-5\ntop_k=-3\n"
          "max_tokens=0\n");
    }
    QSettings ini(path, QSettings::IniFormat);
    AppSettings settings(ini);
    const SamplingDefaults d;
    const SamplingDefaults s = settings.sampling();
    QCOMPARE(s.temperature, d.temperature);
    QCOMPARE(s.top_p, d.top_p);
    QCOMPARE(s.min_p, d.min_p);
    QCOMPARE(s.repeat_penalty, 1.0);
    QCOMPARE(s.top_k, 0);
    QCOMPARE(s.max_tokens, 1);
    // A conversation's stored sampling JSON goes through the same ranges.
    const auto stored = samplingFromJson(R"({"temperature": 1e308, "top_p": -1, "max_tokens": 100000000})");
    QVERIFY(stored.has_value());
    QCOMPARE(stored->temperature, 2.0);
    QCOMPARE(stored->top_p, 0.0);
    QCOMPARE(stored->max_tokens, SamplingDefaults::kMaxTokensLimit);
    // The dialog opens on what was read.
    SettingsDialog dlg(settings, demoContext(0));
    QCOMPARE(dlg.findChild<QDoubleSpinBox*>("temperature")->value(), d.temperature);
  }

  // Typed as a user would: every digit counts, a number out of range is refused
  // with a visible reason and the box keeps its value, never a truncated one.
  void numberBoxesTakeWhatIsTypedOrSayWhyNot() {
    QTemporaryDir dir;
    QSettings ini(dir.filePath("s.ini"), QSettings::IniFormat);
    AppSettings settings(ini);
    settings.setVramBudgetBytes(16'000'000'000);
    SettingsDialog dlg(settings, demoContext(0));
    auto* gb = dlg.findChild<QDoubleSpinBox*>("budgetGb");
    auto* slider = dlg.findChild<QSlider*>("budgetSlider");
    auto* problem = dlg.findChild<QLabel*>("budgetGbProblem");
    QVERIFY(gb && slider && problem);
    const auto typeInto = [](QAbstractSpinBox* box, const QString& text) {
      box->setFocus();
      box->selectAll();
      QTest::keyClicks(box, text);
      QTest::keyClick(box, Qt::Key_Return);
    };
    for (const double card : {80.0, 141.0, 256.0}) {
      typeInto(gb, QString::number(card));
      QCOMPARE(gb->value(), card);
      QCOMPARE(slider->value(), static_cast<int>(card * 4));
      QVERIFY(problem->isHidden());
    }
    QCOMPARE(dlg.budgetBytes(), quint64(256'000'000'000));

    for (const QString& bad : {QString("300"), QString("99999"), QString("-5")}) {
      gb->setFocus();
      gb->selectAll();
      QTest::keyClicks(gb, bad);
      QVERIFY2(!problem->isHidden() && problem->text().contains(bad),
               qPrintable(bad + ": " + problem->text()));
      QTest::keyClick(gb, Qt::Key_Return);
      QCOMPARE(gb->value(), 256.0);  // not 30, 99.99, 5 or 25.6
      QVERIFY2(!problem->isHidden() && problem->text().startsWith("Not applied: " + bad),
               qPrintable(problem->text()));
    }
    typeInto(gb, "24");
    QCOMPARE(gb->value(), 24.0);
    QVERIFY(problem->isHidden());

    auto* tokens = dlg.findChild<QSpinBox*>("maxTokens");
    QVERIFY(tokens);
    typeInto(tokens, "100000");
    QCOMPARE(tokens->value(), 100000);
    typeInto(tokens, "5000000");
    QCOMPARE(tokens->value(), 100000);
    auto* tokens_problem = dlg.findChild<QLabel*>("maxTokensProblem");
    QVERIFY(tokens_problem && !tokens_problem->isHidden());
    QVERIFY2(tokens_problem->text().contains("maximum"), qPrintable(tokens_problem->text()));
    dlg.accept();
    QCOMPARE(settings.vramBudgetBytes(), quint64(24'000'000'000));
    QCOMPARE(settings.sampling().max_tokens, 100000);
  }

  void okWritesEveryField() {
    QTemporaryDir dir;
    const QString path = dir.filePath("s.ini");
    {
      QSettings ini(path, QSettings::IniFormat);
      AppSettings settings(ini);
      SettingsDialog dlg(settings, demoContext(24'000'000'000));
      dlg.findChild<QCheckBox*>("autoBudget")->setChecked(false);
      dlg.findChild<QDoubleSpinBox*>("budgetGb")->setValue(10.5);
      dlg.findChild<QComboBox*>("policy")->setCurrentText("reactive-lru");
      dlg.findChild<QDoubleSpinBox*>("temperature")->setValue(0.0);
      dlg.findChild<QComboBox*>("theme")->setCurrentText("light");
      dlg.accept();
    }
    QSettings ini(path, QSettings::IniFormat);
    AppSettings settings(ini);
    QCOMPARE(settings.vramBudgetBytes(), quint64(10'500'000'000));
    QCOMPARE(settings.cachePolicy(), QString("reactive-lru"));
    QCOMPARE(settings.sampling().temperature, 0.0);
    QCOMPARE(settings.theme(), QString("light"));
  }
};

QTEST_MAIN(GuiSettingsTest)
#include "test_gui_settings.moc"
