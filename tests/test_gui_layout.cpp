// The window's layout on the screens users have: the main window goes down to
// 1024 px wide; the status bar's messages stop short of the model line (elided,
// never running into it); the performance strip's columns and the expert-cache
// dock stay where they are between idle and a streaming reply; the predictor
// wizard opens big enough for every page; in the dark theme error text, links
// and the rings of radio buttons read against their background.
#include <QApplication>
#include <QDeadlineTimer>
#include <QDockWidget>
#include <QImage>
#include <QLabel>
#include <QPainter>
#include <QRadioButton>
#include <QSpinBox>
#include <QStyle>
#include <QStyleOption>
#include <QTest>

#include "app/core/model_registry.h"
#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/composer.h"
#include "ui/context_button.h"
#include "ui/elided_label.h"
#include "ui/perf_strip.h"
#include "ui/predictor_wizard.h"
#include "ui/theme.h"

using namespace moe;

namespace {

// In the strip's order: the plain figures, then the expert-cache details.
const char* kTiles[] = {"perfDecodeTile",    "perfTtftTile", "perfPrefillTile",
                        "perfVramTile",      "perfRamTile",  "perfExpertsTile",
                        "perfPredictorTile", "perfPcieTile", "perfBlockedTile"};

QList<QRect> tileGeometry(MainWindow& w) {
  QList<QRect> out;
  for (const char* name : kTiles) {
    auto* tile = w.perfStrip()->findChild<QWidget*>(name);
    out << (tile ? QRect(tile->mapTo(&w, QPoint(0, 0)), tile->size()) : QRect());
  }
  out << w.findChild<QDockWidget*>("heatDock")->geometry();
  return out;
}

// The highest contrast any pixel of `rect` in `image` has against `background`.
double bestContrast(const QImage& image, const QRect& rect, const QColor& background) {
  double best = 1;
  for (int y = rect.top(); y <= rect.bottom(); ++y)
    for (int x = rect.left(); x <= rect.right(); ++x)
      best = std::max(best, contrastRatio(image.pixelColor(x, y), background));
  return best;
}

QColor over(const QColor& top, const QColor& bottom) {
  const double a = top.alphaF();
  return QColor::fromRgbF(float(top.redF() * a + bottom.redF() * (1 - a)),
                          float(top.greenF() * a + bottom.greenF() * (1 - a)),
                          float(top.blueF() * a + bottom.blueF() * (1 - a)));
}

}  // namespace

class GuiLayoutTest : public QObject {
  Q_OBJECT

 private slots:
  void mainWindowGoesDownTo1024Wide() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    QVERIFY(app.loadDemo());
    MainWindow& w = *app.window;
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY2(w.minimumSizeHint().width() <= 1024, qPrintable(QString::number(w.minimumSizeHint().width())));
    for (bool details : {false, true})
      for (QSize screen : {QSize(1280, 800), QSize(1024, 700)}) {
        w.perfStrip()->setDetailsShown(details);
        w.resize(screen);
        test::settle();
        QCOMPARE(w.size(), screen);
        // The strip's visible tiles side by side, none squeezed below what it needs nor
        // over its neighbour.
        const QList<QRect> all = tileGeometry(w);
        QList<QRect> tiles;
        QStringList names;
        for (int i = 0; i < int(std::size(kTiles)); ++i) {
          auto* tile = w.perfStrip()->findChild<QWidget*>(kTiles[i]);
          if (!tile->isVisible()) continue;
          QVERIFY2(tile->width() >= tile->minimumWidth(), kTiles[i]);
          tiles << all[i];
          names << kTiles[i];
        }
        QCOMPARE(tiles.size(), details ? 9 : 5);
        for (int i = 1; i < tiles.size(); ++i)
          QVERIFY2(tiles[i].left() > tiles[i - 1].right(),
                   qPrintable(
                       QString("%1 overlaps the tile before it at %2 px").arg(names[i]).arg(screen.width())));
        QVERIFY(tiles.last().right() <= w.perfStrip()->mapTo(&w, QPoint(w.perfStrip()->width(), 0)).x());
      }
  }

  // The model box and the context button beside it at both screen sizes: the box's
  // entry is painted whole or elided ("…", whole on hover), never cut at its edge; the
  // context button gets the width its text needs.
  void modelBoxAndContextNeverClip() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    const QString long_name = "Qwen3-30B-A3B-Instruct-2507-UD-Q4_K_XL-with-a-very-long-file-name.gguf";
    app.window->setModelListSource([&] {
      return std::vector<ModelChoice>{{long_name, "/models/long.gguf", "predictor 85%"}};
    });
    QVERIFY(app.loadDemo());
    MainWindow& w = *app.window;
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* combo = w.findChild<ElidingComboBox*>("modelCombo");
    QVERIFY(combo);
    ContextButton* context = w.contextButton();
    QVERIFY(context->isVisible() && context->isEnabled());
    for (QSize screen : {QSize(1280, 800), QSize(1024, 700)})
      for (int entry : {0, 1}) {  // the demo, then the long name
        w.resize(screen);
        combo->setCurrentIndex(entry);
        test::settle();
        const QString at = QString("%1x%2, entry %3").arg(screen.width()).arg(screen.height()).arg(entry);
        QVERIFY2(combo->fontMetrics().horizontalAdvance(combo->shownText()) <= combo->textRect().width(),
                 qPrintable(at));
        if (combo->shownText() != combo->currentText()) {
          QVERIFY2(combo->shownText().endsWith(QChar(0x2026)), qPrintable(at + ": " + combo->shownText()));
          QCOMPARE(combo->hoverText(), combo->currentText());
        }
        QVERIFY2(combo->width() >= combo->minimumSizeHint().width(), qPrintable(at));
        QVERIFY2(context->width() >= context->sizeHint().width(),
                 qPrintable(at + QString(": context button %1 of %2 px")
                                     .arg(context->width())
                                     .arg(context->sizeHint().width())));
        const int right = context->mapTo(&w, QPoint(context->width(), 0)).x();
        QVERIFY2(right <= w.centralWidget()->mapTo(&w, QPoint(w.centralWidget()->width(), 0)).x(),
                 qPrintable(at));
      }
    combo->setCurrentIndex(1);
    w.resize(1024, 700);
    test::settle();
    QVERIFY(combo->shownText() != combo->currentText());  // the long name is elided there
  }

  void statusMessagesStopShortOfTheModelLine() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    QVERIFY(app.loadDemo());
    MainWindow& w = *app.window;
    w.resize(1024, 700);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* bar = qobject_cast<ElidingStatusBar*>(w.statusBar());
    QVERIFY(bar);
    auto* model = w.findChild<QLabel*>("modelStatus");
    QVERIFY(model && model->isVisible() && !model->text().isEmpty());
    const QString message =
        "Reloading Demo model with a 12.0 GB budget once the reply in progress ends, then the cache plan "
        "follows and the figures of the strip start again from the next reply";
    bar->showMessage(message);
    test::settle();
    const QRect r = bar->messageRect();
    QVERIFY2(
        r.right() < model->x(),
        qPrintable(QString("message ends at %1, model line starts at %2").arg(r.right()).arg(model->x())));
    const QString shown = bar->shownMessage();
    QVERIFY2(shown.endsWith(QChar(0x2026)), qPrintable(shown));  // elided, not cut into the next widget
    QVERIFY(bar->fontMetrics().horizontalAdvance(shown) <= r.width());
    QCOMPARE(bar->currentMessage(), message);  // the whole text is still what the bar holds
    QCOMPARE(bar->hoverText(), message);       // and hovering it shows it whole
    bar->showMessage("Copied");
    QVERIFY(bar->hoverText().isEmpty());  // nothing cut off: no tooltip
    // The model line itself is elided to its room, never wider than the bar, and shows
    // whole on hover when cut.
    auto* elided = qobject_cast<ElidedLabel*>(model);
    QVERIFY(elided);
    QVERIFY(model->geometry().right() <= bar->width());
    const QString longer = message + " " + message + " " + message;  // wider than the window
    elided->setText(longer);
    test::settle();
    QVERIFY(elided->shownText() != longer);
    QCOMPARE(elided->hoverText(), longer);
  }

  void stripAndDockStayPutWhileAReplyStreams() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    test::FakeChatEngine* fake = engine.get();
    fake->words.assign(20, " word");
    fake->hold_after_first = true;  // the reply streams until the test lets it end
    test::GuiApp app(std::move(engine));
    QVERIFY(app.loadDemo());
    MainWindow& w = *app.window;
    w.resize(1280, 800);
    w.perfStrip()->setDetailsShown(true);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.perfStrip()->pollNow();
    test::settle();
    const QList<QRect> idle = tileGeometry(w);
    const QString idle_text = w.perfStrip()->findChild<QLabel*>("perfExperts")->text();

    auto* edit = w.composer()->editor();
    edit->setFocus();
    QTest::keyClicks(edit, "stream something");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY_WITH_TIMEOUT(fake->replies.load() == 1 && app.chat->busy(), 10000);
    // The strip's texts change while the reply streams (its figures of this reply),
    // and no tile moves. The figures are rates between two polls: poll until one
    // interval saw the engine's counters move (the held reply keeps them moving).
    auto* experts = w.perfStrip()->findChild<QLabel*>("perfExperts");
    QString streaming_text = idle_text;
    for (QDeadlineTimer deadline(20000); streaming_text == idle_text && !deadline.hasExpired();) {
      QTest::qWait(30);
      w.perfStrip()->pollNow();
      test::settle();
      streaming_text = experts->text();
    }
    QVERIFY2(streaming_text != idle_text, qPrintable(streaming_text));
    QVERIFY(app.chat->busy());
    QCOMPARE(tileGeometry(w), idle);
    fake->hold_after_first = false;
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 20000);
    w.perfStrip()->pollNow();
    w.perfStrip()->pollNow();  // idle again: "last reply: ..."
    test::settle();
    QVERIFY(w.perfStrip()->findChild<QLabel*>("perfExpertsCaption")->text().endsWith("last reply"));
    QCOMPARE(tileGeometry(w), idle);
  }

  void predictorWizardOpensBigEnoughForEveryPage() {
    QTemporaryDir dir;
    AppDatabase db = AppDatabase::open(dir.filePath("p.db").toStdString());
    ModelRegistry registry(db);
    PredictorWizard wizard(db, registry, dir.filePath("traces"));
    wizard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&wizard));
    const QSize area = wizard.currentPage()->size();
    for (int id : wizard.pageIds()) {
      QWizardPage* page = wizard.page(id);
      const QSize want = page->sizeHint();
      QVERIFY2(area.width() >= want.width() && area.height() >= want.height(),
               qPrintable(QString("page %1 (%2) wants %3x%4, has %5x%6")
                              .arg(id)
                              .arg(page->title())
                              .arg(want.width())
                              .arg(want.height())
                              .arg(area.width())
                              .arg(area.height())));
      for (QSpinBox* box : page->findChildren<QSpinBox*>())
        QVERIFY2(page->minimumSizeHint().width() <= area.width() && box->sizeHint().width() <= area.width(),
                 qPrintable(box->objectName()));
    }
  }

  // The demo banner's link, switched to the dark theme while the window is open:
  // drawn in the dark palette's link colour, not the light one's blue.
  void bannerLinkFollowsTheTheme() {
    auto* app = qobject_cast<QApplication*>(QApplication::instance());
    applyTheme(*app, "light");
    const QColor light_link = QApplication::palette().color(QPalette::Link);
    test::GuiApp gui(std::make_unique<test::FakeChatEngine>());
    gui.window->setModelWizardLauncher([] {});
    QVERIFY(gui.loadDemo());
    QVERIFY(QTest::qWaitForWindowExposed(gui.window.get()));
    auto* banner = gui.window->findChild<QLabel*>("demoBanner");
    QVERIFY(banner && banner->isVisible());
    auto count = [&](const QColor& c) {
      const QImage image = banner->grab().toImage();
      int n = 0;
      for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) n += image.pixelColor(x, y).rgb() == c.rgb();
      return n;
    };
    QVERIFY(count(light_link) > 10);  // the link is there, in the light theme's colour
    applyTheme(*app, "dark");
    test::settle();
    const QColor dark_link = QApplication::palette().color(QPalette::Link);
    QVERIFY(dark_link != light_link);
    QCOMPARE(count(light_link), 0);
    QVERIFY2(count(dark_link) > 10, qPrintable(dark_link.name()));
    applyTheme(*app, "light");
  }

  void darkThemeTextAndIndicatorsRead() {
    auto* app = qobject_cast<QApplication*>(QApplication::instance());
    applyTheme(*app, "dark");
    const QPalette dark = QApplication::palette();
    const QColor window = dark.color(QPalette::Window);
    QVERIFY2(contrastRatio(errorColor(dark), window) >= 4.5,
             qPrintable(QString::number(contrastRatio(errorColor(dark), window))));
    // The demo banner's link, on the banner's amber wash over the window.
    const QColor banner = over(QColor(0xe0, 0xa3, 0x2e, 60), window);
    QVERIFY2(contrastRatio(dark.color(QPalette::Link), banner) >= 4.5,
             qPrintable(QString::number(contrastRatio(dark.color(QPalette::Link), banner))));
    // A radio button's ring: at least 3:1 against the window (WCAG, user interface components).
    QRadioButton radio("Option");
    radio.resize(radio.sizeHint());
    QImage image(radio.size(), QImage::Format_ARGB32);
    image.fill(window);
    radio.render(&image);
    QStyleOptionButton opt;
    opt.initFrom(&radio);
    const QRect ring = radio.style()->subElementRect(QStyle::SE_RadioButtonIndicator, &opt, &radio);
    QVERIFY(!ring.isEmpty());
    const double ring_contrast = bestContrast(image, ring, window);
    QVERIFY2(ring_contrast >= 3.0, qPrintable(QString::number(ring_contrast)));
    // And the light theme keeps its reading too.
    applyTheme(*app, "light");
    const QPalette light = QApplication::palette();
    QVERIFY(contrastRatio(errorColor(light), light.color(QPalette::Window)) >= 4.5);
  }
};

QTEST_MAIN(GuiLayoutTest)
#include "test_gui_layout.moc"
