// moechat: the desktop app. Opens the database in the data folder, starts the
// engine thread, loads the last model (or the demo model on first start) and
// shows the main window. `--screenshot DIR` renders the main window, the
// settings and the wizard to PNG files and exits (works offscreen).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <cstdio>
#include <cstdlib>

#include "app/core/app_database.h"
#include "app/core/database_startup.h"
#include "app/core/local_chat_engine.h"
#include "app/core/model_registry.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_app.h"
#include "app/qt/instance_lock.h"
#include "desktop/app_wiring.h"
#include "ui/main_window.h"
#include "ui/screenshots.h"
#include "ui/theme.h"

namespace {

// Qt aborts when no display is reachable; say why first and leave cleanly.
bool displayReachable() {
  const QByteArray platform = qgetenv("QT_QPA_PLATFORM");
  if (!platform.isEmpty() && platform != "xcb" && platform != "wayland") return true;  // offscreen, vnc, ...
  return qEnvironmentVariableIsSet("DISPLAY") || qEnvironmentVariableIsSet("WAYLAND_DISPLAY");
}

int run(int argc, char** argv) {
  if (!displayReachable()) {
    std::fprintf(
        stderr,
        "moechat: no display found (DISPLAY and WAYLAND_DISPLAY are unset), so the window cannot open.\n"
        "  Run it from a desktop session, or headless with QT_QPA_PLATFORM=offscreen (e.g. with\n"
        "  --screenshot DIR), or use the same engine without a window: moechat-cli generate --demo\n");
    return 2;
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("moechat");
  QApplication::setOrganizationName("moechat");
  QApplication::setApplicationVersion(MOECHAT_VERSION);

  QCommandLineParser cli;
  cli.setApplicationDescription("Chat with Mixture-of-Experts models larger than your GPU's memory.");
  cli.addHelpOption();
  cli.addVersionOption();
  QCommandLineOption data_dir("data-dir", "Keep chats and settings in DIR (default: the user's data folder).",
                              "DIR");
  QCommandLineOption demo("demo",
                          "Start on the demo model (trained on the Brown corpus; shipped with moechat).");
  QCommandLineOption screenshot("screenshot",
                                "Render the main window, settings and wizard to PNG files in DIR "
                                "and exit.",
                                "DIR");
  cli.addOptions({data_dir, demo, screenshot});
  cli.process(app);

  std::unique_ptr<QSettings> ini;
  if (cli.isSet(data_dir)) {
    QDir().mkpath(cli.value(data_dir));
    ini =
        std::make_unique<QSettings>(QDir(cli.value(data_dir)).filePath("moechat.ini"), QSettings::IniFormat);
  } else {
    ini = std::make_unique<QSettings>();
  }
  moe::AppSettings settings(*ini);
  if (cli.isSet(data_dir)) settings.setDataFolder(cli.value(data_dir));
  if (cli.isSet(demo) || cli.isSet(screenshot)) settings.setLastModelPath({});
  moe::applyTheme(app, settings.theme());

  const moe::InstanceLock instance = moe::lockDataFolder(settings.dataFolder());
  if (!instance.lock) {
    QMessageBox::critical(nullptr, "moechat is already running", instance.error);
    std::fprintf(stderr, "moechat: %s\n", qPrintable(instance.error));
    return 1;
  }
  const QString db_path = QDir(settings.dataFolder()).filePath("moechat.db");
  // A database that may not be written is read from a copy in the temporary folder.
  const QString copy_folder =
      QDir(QStandardPaths::writableLocation(QStandardPaths::TempLocation)).filePath("moechat");
  auto opened = moe::openChatDatabase(
      db_path.toStdString(), copy_folder.toStdString(),
      [&](moe::DatabaseTrouble trouble, const std::string& why) {
        const QString text = QString("%1\n\nYour chats are in %2. moechat has not changed that file.")
                                 .arg(QString::fromStdString(why), db_path);
        if (trouble == moe::DatabaseTrouble::InUse || trouble == moe::DatabaseTrouble::Newer) {
          QMessageBox::critical(nullptr, "moechat cannot open its database", text);
          return moe::DatabaseWayOut::Quit;
        }
        const bool unreadable = trouble == moe::DatabaseTrouble::Unreadable;
        QMessageBox box(
            QMessageBox::Critical,
            unreadable ? "moechat cannot read its database" : "moechat cannot write its database",
            text + (unreadable ? "\n\nStart with a new, empty chat database? The unreadable file is "
                                 "kept next to it (renamed), for a recovery tool or a backup."
                               : "\n\nRead your chats from a copy? They can be read, searched and "
                                 "exported; nothing new is saved until the file is writable."));
        QPushButton* yes =
            box.addButton(unreadable ? "Start with a new database" : "Read a copy", QMessageBox::AcceptRole);
        box.addButton("Quit", QMessageBox::RejectRole);
        box.exec();
        if (box.clickedButton() != yes) return moe::DatabaseWayOut::Quit;
        return unreadable ? moe::DatabaseWayOut::StartFresh : moe::DatabaseWayOut::ReadACopy;
      });
  if (!opened.db) {
    std::fprintf(stderr, "moechat: %s\n", opened.error.c_str());
    return 1;
  }
  std::optional<moe::AppDatabase>& db = opened.db;
  const auto recovered = opened.recovered_replies;
  moe::ModelRegistry registry(*db);

  moe::ChatApp chat_app(*db, settings, std::make_unique<moe::LocalChatEngine>());
  moe::MainWindow window(settings, chat_app.store(), chat_app.chat(), chat_app.engine());
  moe::AppWiring wiring(window, settings, registry, *db);
  if (!opened.read_only_original.empty())
    window.setReadOnly(
        QString("Read-only: moechat may not write %1, so you are reading a copy of it. Chats can be "
                "read, searched and exported; nothing new is saved.")
            .arg(QString::fromStdString(opened.read_only_original)));
  else if (!opened.set_aside.empty())
    window.showNotice(QString("Started with a new chat database; the unreadable one is kept as %1.")
                          .arg(QString::fromStdString(opened.set_aside)));
  else if (recovered > 0)
    window.showNotice(QString::fromStdString(moe::recoveredRepliesNotice(recovered, opened.recovered_chats)));

  window.loadInitialModel();
  if (cli.isSet(screenshot)) {
    moe::ScreenshotSources sources;
    sources.model_wizard = [&] { return wiring.makeWizard(&window); };
    sources.predictor_wizard = [&] { return wiring.makePredictorWizard(&window); };
    sources.models_view = [&] { return std::unique_ptr<QWidget>(wiring.makeModelsView(&window)); };
    return moe::renderScreenshots(window, settings, cli.value(screenshot), sources);
  }
  window.show();
  const int rc = app.exec();
  // Quitting: the controller saves a streaming reply as stopped, the engine thread
  // stops and is joined, and the model's memory is left to the exit (seconds saved).
  chat_app.engine().leaveEngineToExit();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = run(argc, argv);
  // Everything the app owns is saved and closed by now (database, settings, the
  // instance lock). What is left is the engine's memory and its idle threads:
  // end here rather than run static destructors beside those threads.
  std::fflush(nullptr);
  std::_Exit(rc);
}
