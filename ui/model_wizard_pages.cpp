#include "ui/model_wizard_pages.h"

#include <QButtonGroup>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QTreeWidget>
#include <QUrl>
#include <QVBoxLayout>

#include "app/qt/download_manager.h"
#include "ui/model_wizard.h"
#include "ui/theme.h"

namespace moe {

namespace {

enum CatalogColumn { ColName, ColQuant, ColSize, ColLicence, ColFit, ColChecksum, ColCount };
constexpr int kDetailsRole = Qt::UserRole + 1;  // the selected row's full description

// An error line that keeps its place (two lines tall) while hidden, so showing it
// moves nothing else on the page. Its colour follows the theme (errorColor).
QLabel* errorLabel(QWidget* parent, const QString& name = QStringLiteral("errorLabel")) {
  auto* l = new QLabel(parent);
  l->setObjectName(name);
  l->setWordWrap(true);
  QPalette pal = l->palette();
  pal.setColor(QPalette::WindowText, errorColor(pal));
  l->setPalette(pal);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  l->setMinimumHeight(2 * l->fontMetrics().lineSpacing());
  l->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  QSizePolicy keep = l->sizePolicy();
  keep.setRetainSizeWhenHidden(true);
  keep.setVerticalPolicy(QSizePolicy::Fixed);
  l->setSizePolicy(keep);
  l->hide();
  return l;
}

}  // namespace

QString speedText(double bytes_per_sec, bool running) {
  if (running && bytes_per_sec <= 0) return QStringLiteral("0 B/s (stalled)");
  return humanBytes(uint64_t(bytes_per_sec)) + QStringLiteral("/s");
}

QString etaText(qint64 eta_s) {
  if (eta_s < 0) return QStringLiteral("ETA unknown");
  const qint64 h = eta_s / 3600, m = (eta_s / 60) % 60, s = eta_s % 60;
  if (h > 0)
    return QStringLiteral("ETA %1:%2:%3")
        .arg(h)
        .arg(m, 2, 10, QLatin1Char('0'))
        .arg(s, 2, 10, QLatin1Char('0'));
  return QStringLiteral("ETA %1:%2").arg(m).arg(s, 2, 10, QLatin1Char('0'));
}

// ---- choose ---------------------------------------------------------------

ChooseModelPage::ChooseModelPage(ModelWizard& wizard) : wizard_(wizard) {
  setTitle(tr("Choose a model"));
  setSubTitle(wizard.fitFor() + tr(" Nothing is downloaded until you press Next."));

  catalog_radio_ = new QRadioButton(tr("From the catalog"), this);
  catalog_radio_->setObjectName(QStringLiteral("catalogRadio"));
  hub_radio_ = new QRadioButton(tr("Search Hugging Face for a GGUF file (on the next page)"), this);
  hub_radio_->setObjectName(QStringLiteral("hubRadio"));
  url_radio_ = new QRadioButton(tr("From a URL"), this);
  url_radio_->setObjectName(QStringLiteral("urlRadio"));
  local_radio_ = new QRadioButton(tr("A GGUF file on this computer"), this);
  local_radio_->setObjectName(QStringLiteral("localRadio"));
  auto* group = new QButtonGroup(this);
  group->addButton(catalog_radio_);
  group->addButton(hub_radio_);
  group->addButton(url_radio_);
  group->addButton(local_radio_);
  catalog_radio_->setChecked(true);

  catalog_list_ = new QTreeWidget(this);
  catalog_list_->setObjectName(QStringLiteral("catalogList"));
  catalog_list_->setRootIsDecorated(false);
  catalog_list_->setColumnCount(ColCount);
  catalog_list_->setHeaderLabels(
      {tr("Model"), tr("Quant"), tr("Size"), tr("Licence"), wizard.fitHeading(), tr("Checksum")});
  catalog_list_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  details_ = new QLabel(this);
  details_->setObjectName(QStringLiteral("catalogDetails"));
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setText(tr("Select a model to see what it needs."));
  fillCatalog();

  url_edit_ = new QLineEdit(this);
  url_edit_->setObjectName(QStringLiteral("urlEdit"));
  url_edit_->setPlaceholderText(QStringLiteral("https://huggingface.co/.../resolve/main/model.gguf"));
  sha_edit_ = new QLineEdit(this);
  sha_edit_->setObjectName(QStringLiteral("shaEdit"));
  sha_edit_->setPlaceholderText(tr("SHA-256 (optional: without it only the GGUF header is checked)"));
  local_edit_ = new QLineEdit(this);
  local_edit_->setObjectName(QStringLiteral("localEdit"));
  browse_ = new QPushButton(tr("Browse..."), this);
  error_label_ = errorLabel(this);
  url_error_ = errorLabel(this, QStringLiteral("urlErrorLabel"));
  local_error_ = errorLabel(this, QStringLiteral("localErrorLabel"));

  auto* url_form = new QFormLayout;
  url_form->addRow(tr("URL"), url_edit_);
  url_form->addRow(tr("SHA-256"), sha_edit_);
  auto* local_row = new QHBoxLayout;
  local_row->addWidget(local_edit_, 1);
  local_row->addWidget(browse_);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(catalog_radio_);
  layout->addWidget(catalog_list_, 1);
  layout->addWidget(details_);
  layout->addWidget(error_label_);  // the catalog's errors, under its details
  layout->addWidget(hub_radio_);
  layout->addWidget(url_radio_);
  layout->addLayout(url_form);
  layout->addWidget(url_error_);
  layout->addWidget(local_radio_);
  layout->addLayout(local_row);
  layout->addWidget(local_error_);

  // Typing or choosing in a section selects that section.
  connect(catalog_list_, &QTreeWidget::itemSelectionChanged, this, [this] {
    const auto items = catalog_list_->selectedItems();
    if (!items.isEmpty()) {
      catalog_radio_->setChecked(true);
      details_->setText(items.front()->data(ColName, kDetailsRole).toString());
    }
    emit completeChanged();
  });
  connect(url_edit_, &QLineEdit::textEdited, this, [this] { url_radio_->setChecked(true); });
  connect(local_edit_, &QLineEdit::textEdited, this, [this] { local_radio_->setChecked(true); });
  for (QLineEdit* e : {url_edit_, local_edit_})
    connect(e, &QLineEdit::textChanged, this, &ChooseModelPage::completeChanged);
  connect(group, &QButtonGroup::buttonToggled, this, [this] {
    hideErrors();
    emit completeChanged();
  });
  connect(browse_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Choose a GGUF model"), wizard_.modelsDir(),
                                                      tr("GGUF models (*.gguf);;All files (*)"));
    if (path.isEmpty()) return;
    local_edit_->setText(path);
    local_radio_->setChecked(true);
  });
}

void ChooseModelPage::fillCatalog() {
  for (const CatalogEntry& e : wizard_.catalog().entries()) {
    auto* item = new QTreeWidgetItem(catalog_list_);
    item->setText(ColName, e.name);
    item->setData(ColName, Qt::UserRole, e.id);
    item->setText(ColQuant, e.quant);
    QString fit_text, fit_short, size_text;
    try {
      const CatalogFit fit = estimateCatalogFit(e, wizard_.planRequest(), wizard_.device());
      fit_text = fit.summary();
      fit_short = fit.shortSummary();
      item->setText(ColSize, e.size_bytes > 0 ? humanBytes(uint64_t(e.size_bytes))
                                              : QStringLiteral("~") + humanBytes(fit.estimated_file_bytes));
      size_text = e.size_bytes > 0 ? tr("%1 bytes (published)").arg(e.size_bytes)
                                   : tr("about %1, estimated from the model's shape (no published size)")
                                         .arg(humanBytes(fit.estimated_file_bytes));
    } catch (const std::exception& ex) {
      fit_text = fit_short = tr("cannot estimate: %1").arg(QString::fromUtf8(ex.what()));
      item->setText(ColSize, e.size_bytes > 0 ? humanBytes(uint64_t(e.size_bytes)) : tr("unknown"));
      size_text = item->text(ColSize);
    }
    item->setText(ColLicence, e.licence);
    item->setText(ColFit, fit_short);
    item->setText(ColChecksum, e.checksumShort());
    item->setToolTip(ColFit, fit_text);
    item->setToolTip(ColChecksum, e.checksumNote());
    item->setData(
        ColName, kDetailsRole,
        tr("%1 (%2, %3): %4\nFit: %5\nSize: %6\nAfter download: %7\nLicence: %8")
            .arg(e.name, e.family, e.quant, e.needs, fit_text, size_text, e.checksumNote(), e.licence));
  }
}

bool ChooseModelPage::isComplete() const {
  if (hub_radio_->isChecked()) return true;
  if (catalog_radio_->isChecked()) return !catalog_list_->selectedItems().isEmpty();
  if (url_radio_->isChecked()) return !url_edit_->text().trimmed().isEmpty();
  return !local_edit_->text().trimmed().isEmpty();
}

void ChooseModelPage::showError(const QString& message) {
  // Under the section the user chose, so it sits next to the field it is about.
  QLabel* label = url_radio_->isChecked()     ? url_error_
                  : local_radio_->isChecked() ? local_error_
                                              : error_label_;
  label->setText(message);
  label->show();
}

void ChooseModelPage::hideErrors() {
  for (QLabel* l : {error_label_, url_error_, local_error_}) l->hide();
}

bool ChooseModelPage::validatePage() {
  hideErrors();
  wizard_.chooseHub(hub_radio_->isChecked());
  if (hub_radio_->isChecked()) return true;
  if (catalog_radio_->isChecked()) return chooseCatalog();
  if (url_radio_->isChecked()) return chooseUrl();
  return chooseLocal();
}

bool ChooseModelPage::chooseCatalog() {
  const auto items = catalog_list_->selectedItems();
  if (items.isEmpty()) return false;
  const CatalogEntry* e = wizard_.catalog().find(items.front()->data(ColName, Qt::UserRole).toString());
  if (!e) return false;
  const QString err = wizard_.startDownload(QUrl(e->url), e->fileName(), e->sha256, e->size_bytes, e->id);
  if (!err.isEmpty()) showError(err);
  return err.isEmpty();
}

bool ChooseModelPage::chooseUrl() {
  const QUrl url = QUrl::fromUserInput(url_edit_->text().trimmed());
  if (!url.isValid() || (url.scheme() != QStringLiteral("https") && url.scheme() != QStringLiteral("http"))) {
    showError(tr("Not an http(s) URL: %1").arg(url_edit_->text().trimmed()));
    return false;
  }
  const QString name = url.fileName();
  if (!name.endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive)) {
    showError(tr("The URL does not name a .gguf file: %1").arg(url.toString()));
    return false;
  }
  const QString err = wizard_.startDownload(url, name, sha_edit_->text().trimmed(), -1, QString());
  if (!err.isEmpty()) showError(err);
  return err.isEmpty();
}

bool ChooseModelPage::chooseLocal() {
  const QString path = local_edit_->text().trimmed();
  const QFileInfo info(path);
  if (info.isDir()) {
    showError(tr("%1 is a folder: choose a .gguf file in it.").arg(path));
    return false;
  }
  if (!info.isFile()) {
    showError(tr("No such file: %1").arg(path));
    return false;
  }
  const QString err = wizard_.installLocal(path);
  if (!err.isEmpty()) showError(err);
  return err.isEmpty();
}

// ---- download -------------------------------------------------------------

DownloadModelPage::DownloadModelPage(ModelWizard& wizard) : wizard_(wizard) {
  setTitle(tr("Downloading"));  // then the state's title (onState)
  title_ = new QLabel(this);
  title_->setWordWrap(true);
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("progressBar"));
  state_label_ = new QLabel(this);
  state_label_->setObjectName(QStringLiteral("stateLabel"));
  speed_label_ = new QLabel(this);
  speed_label_->setObjectName(QStringLiteral("speedLabel"));
  eta_label_ = new QLabel(this);
  eta_label_->setObjectName(QStringLiteral("etaLabel"));
  pause_button_ = new QPushButton(tr("Pause"), this);
  pause_button_->setObjectName(QStringLiteral("pauseButton"));
  error_label_ = errorLabel(this);

  auto* figures = new QHBoxLayout;
  figures->addWidget(state_label_);
  figures->addStretch(1);
  figures->addWidget(speed_label_);
  figures->addWidget(eta_label_);
  figures->addWidget(pause_button_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addWidget(progress_);
  layout->addLayout(figures);
  layout->addWidget(error_label_);
  layout->addStretch(1);

  DownloadManager& dm = wizard_.downloads();
  connect(&dm, &DownloadManager::progress, this, &DownloadModelPage::onProgress);
  connect(&dm, &DownloadManager::stateChanged, this, &DownloadModelPage::onState);
  connect(
      &dm, &DownloadManager::retrying, this,
      [this](qint64 id, int attempt, int delay_ms, const QString& why) {
        if (id != wizard_.downloadId()) return;
        state_label_->setText(
            tr("Retrying in %1 s (attempt %2): %3").arg(delay_ms / 1000.0, 0, 'f', 1).arg(attempt).arg(why));
      });
  connect(&dm, &DownloadManager::failed, this, [this](qint64 id, const QString& error) {
    if (id != wizard_.downloadId()) return;
    error_label_->setText(error);
    error_label_->show();
  });
  connect(&dm, &DownloadManager::finished, this, [this](qint64 id, const QString& path) {
    if (id != wizard_.downloadId()) return;
    done_ = true;
    pause_button_->setEnabled(false);
    wizard_.markInstalled(path);
    emit completeChanged();
  });
  connect(pause_button_, &QPushButton::clicked, this, &DownloadModelPage::togglePause);
}

void DownloadModelPage::initializePage() {
  const DownloadStatus st = wizard_.downloads().status(wizard_.downloadId());
  title_->setText(tr("%1\nto %2").arg(st.url.toString(), st.dest));
  done_ = st.state == QStringLiteral("done");
  onState(st.id, st.state);
  onProgress(st.id, st.bytes_done, st.total, st.bytes_per_sec, st.eta_s);
}

void DownloadModelPage::onProgress(qint64 id, qint64 done, qint64 total, double bytes_per_sec, qint64 eta_s) {
  if (id != wizard_.downloadId()) return;
  if (wizard_.downloads().status(id).state == QStringLiteral("failed")) return;  // onState drew it
  if (total > 0) {
    progress_->setRange(0, 1000);
    progress_->setValue(int(1000.0 * double(done) / double(total)));
    progress_->setFormat(
        QStringLiteral("%1 of %2").arg(humanBytes(uint64_t(done)), humanBytes(uint64_t(total))));
  } else {
    progress_->setRange(0, 0);  // size unknown yet: busy indicator
  }
  const bool running = wizard_.downloads().status(id).state == QStringLiteral("running");
  speed_label_->setText(speedText(bytes_per_sec, running));
  eta_label_->setText(etaText(eta_s));
}

void DownloadModelPage::onState(qint64 id, const QString& state) {
  if (id != wizard_.downloadId()) return;
  static const QHash<QString, QString> kWords = {{QStringLiteral("queued"), tr("Waiting")},
                                                 {QStringLiteral("running"), tr("Downloading")},
                                                 {QStringLiteral("paused"), tr("Paused")},
                                                 {QStringLiteral("verifying"), tr("Checking the file")},
                                                 {QStringLiteral("done"), tr("Downloaded and checked")},
                                                 {QStringLiteral("failed"), tr("Failed")}};
  static const QHash<QString, QString> kTitles = {{QStringLiteral("queued"), tr("Waiting to download")},
                                                  {QStringLiteral("paused"), tr("Download paused")},
                                                  {QStringLiteral("verifying"), tr("Checking the download")},
                                                  {QStringLiteral("done"), tr("Downloaded")},
                                                  {QStringLiteral("failed"), tr("Download failed")}};
  setTitle(kTitles.value(state, tr("Downloading")));
  state_label_->setText(kWords.value(state, state));
  // A failed download's bar shows what is kept (a corrupt file is removed: empty) in the error colour.
  const bool failed = state == QStringLiteral("failed");
  QPalette bar = progress_->palette();
  bar.setColor(QPalette::Highlight, failed ? errorColor(bar) : palette().color(QPalette::Highlight));
  progress_->setPalette(bar);
  if (failed) {
    const DownloadStatus st = wizard_.downloads().status(id);
    if (st.total > 0) {
      progress_->setRange(0, 1000);
      progress_->setValue(int(1000.0 * double(st.bytes_done) / double(st.total)));
      progress_->setFormat(tr("Failed: %1 of %2 kept")
                               .arg(humanBytes(uint64_t(st.bytes_done)), humanBytes(uint64_t(st.total))));
    } else {
      progress_->setRange(0, 1);
      progress_->setValue(0);
      progress_->setFormat(tr("Failed"));
    }
  }
  const bool resumable = state == QStringLiteral("paused") || state == QStringLiteral("failed");
  pause_button_->setText(resumable ? (state == QStringLiteral("failed") ? tr("Retry") : tr("Resume"))
                                   : tr("Pause"));
  pause_button_->setEnabled(state != QStringLiteral("done") && state != QStringLiteral("verifying"));
  if (state != QStringLiteral("failed")) error_label_->hide();
}

void DownloadModelPage::togglePause() {
  DownloadManager& dm = wizard_.downloads();
  const qint64 id = wizard_.downloadId();
  const QString state = dm.status(id).state;
  if (state == QStringLiteral("paused") || state == QStringLiteral("failed"))
    dm.resume(id);
  else
    dm.pause(id);
}

// ---- done -----------------------------------------------------------------

InstalledModelPage::InstalledModelPage(ModelWizard& wizard) : wizard_(wizard) {
  setTitle(tr("Model installed"));
  path_label_ = new QLabel(this);
  path_label_->setObjectName(QStringLiteral("donePath"));
  path_label_->setWordWrap(true);
  path_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(path_label_);
  layout->addStretch(1);
}

void InstalledModelPage::initializePage() {
  path_label_->setText(tr("%1 is ready and listed among your models.").arg(wizard_.installedPath()));
}

}  // namespace moe
