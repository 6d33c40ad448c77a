#include "ui/model_wizard_hub_page.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "ui/model_wizard.h"
#include "ui/theme.h"

namespace moe {
namespace {

constexpr int kRepoRole = Qt::UserRole + 1;  // on every row: the repository id
constexpr int kFileRole = Qt::UserRole + 2;  // on file rows: the index in files_[repo]

}  // namespace

HubSearchPage::HubSearchPage(ModelWizard& wizard) : wizard_(wizard) {
  setTitle(tr("Search Hugging Face"));
  setSubTitle(tr("GGUF files of the MoE models this app runs. ") + wizard.fitFor());
  query_ = new QLineEdit(this);
  query_->setObjectName(QStringLiteral("hubQuery"));
  query_->setPlaceholderText(tr("e.g. Qwen3 30B A3B, Mixtral, OLMoE"));
  search_ = new QPushButton(tr("Search"), this);
  search_->setObjectName(QStringLiteral("hubSearchButton"));
  results_ = new QTreeWidget(this);
  results_->setObjectName(QStringLiteral("hubResults"));
  results_->setColumnCount(ColCount);
  results_->setHeaderLabels(
      {tr("Repository / file"), tr("Quant"), tr("Size"), wizard.fitHeading(), tr("Checksum")});
  results_->header()->setSectionResizeMode(ColFit, QHeaderView::Stretch);
  results_->header()->setStretchLastSection(false);
  results_->setColumnWidth(ColName, 380);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("hubStatus"));
  status_->setWordWrap(true);
  details_ = new QLabel(tr("Open a repository to see its files."), this);
  details_->setObjectName(QStringLiteral("hubDetails"));
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_ = new QLabel(this);
  error_->setObjectName(QStringLiteral("hubError"));
  error_->setWordWrap(true);
  QPalette pal = error_->palette();
  pal.setColor(QPalette::WindowText, errorColor(pal));
  error_->setPalette(pal);

  auto* row = new QHBoxLayout;
  row->addWidget(query_, 1);
  row->addWidget(search_);
  auto* v = new QVBoxLayout(this);
  v->addLayout(row);
  v->addWidget(status_);
  v->addWidget(results_, 1);
  v->addWidget(details_);
  v->addWidget(error_);

  connect(search_, &QPushButton::clicked, this, &HubSearchPage::runSearch);
  connect(query_, &QLineEdit::returnPressed, this, &HubSearchPage::runSearch);
  connect(results_, &QTreeWidget::itemExpanded, this, [this](QTreeWidgetItem* item) {
    const QString repo = item->data(ColName, kRepoRole).toString();
    if (!item->parent() && !files_.contains(repo)) {
      status_->setText(tr("Listing the files of %1…").arg(repo));
      hub_->listFiles(repo);
    }
  });
  connect(results_, &QTreeWidget::itemSelectionChanged, this, [this] {
    error_->clear();
    const auto items = results_->selectedItems();
    if (!items.isEmpty() && !items.front()->parent()) items.front()->setExpanded(true);
    if (selectedFile()) details_->setText(results_->selectedItems().front()->toolTip(ColFit));
    emit completeChanged();
  });
}

void HubSearchPage::initializePage() {
  if (!hub_) {
    hub_ = new HubSearch(wizard_.hubBase(), this);
    connect(hub_, &HubSearch::reposFound, this, &HubSearchPage::showRepos);
    connect(hub_, &HubSearch::filesFound, this, &HubSearchPage::showFiles);
    connect(hub_, &HubSearch::failed, this, [this](const QString& why) {
      status_->setText(why);
      search_->setEnabled(true);
    });
  }
  query_->setFocus();
}

void HubSearchPage::runSearch() {
  const QString q = query_->text().trimmed();
  if (q.isEmpty()) return;
  status_->setText(tr("Searching the Hugging Face hub for “%1”…").arg(q));
  search_->setEnabled(false);
  hub_->search(q);
}

void HubSearchPage::showRepos(const QList<HubRepo>& repos) {
  search_->setEnabled(true);
  results_->clear();
  repos_.clear();
  files_.clear();
  int others = 0;
  for (const HubRepo& r : repos) {
    if (r.family.isEmpty()) {
      ++others;
      continue;
    }
    repos_.insert(r.id, r);
    auto* item = new QTreeWidgetItem(results_);
    item->setText(ColName, r.id);
    item->setData(ColName, kRepoRole, r.id);
    item->setToolTip(ColName, tr("%1 · %2 downloads · %3 likes").arg(r.family).arg(r.downloads).arg(r.likes));
    item->setText(ColQuant, r.family);
    item->setChildIndicatorPolicy(QTreeWidgetItem::ShowIndicator);
  }
  QString text = repos_.isEmpty() ? tr("No GGUF repository of a supported MoE model found.")
                                  : tr("%n repository(s) of supported MoE models; open one to see its files.",
                                       nullptr, int(repos_.size()));
  if (others > 0) text += tr(" %n other(s) left out: not an architecture this app runs.", nullptr, others);
  status_->setText(text);
  emit completeChanged();
}

QTreeWidgetItem* HubSearchPage::repoItem(const QString& repo_id) const {
  for (int i = 0; i < results_->topLevelItemCount(); ++i)
    if (results_->topLevelItem(i)->data(ColName, kRepoRole).toString() == repo_id)
      return results_->topLevelItem(i);
  return nullptr;
}

void HubSearchPage::showFiles(const QString& repo_id, const QList<HubFile>& files) {
  QTreeWidgetItem* parent = repoItem(repo_id);
  if (!parent) return;
  files_.insert(repo_id, files);
  qDeleteAll(parent->takeChildren());
  const HubRepo& repo = repos_[repo_id];
  for (int i = 0; i < files.size(); ++i) {
    const HubFile& f = files[i];
    auto* item = new QTreeWidgetItem(parent);
    item->setText(ColName, f.path);
    item->setData(ColName, kRepoRole, repo_id);
    item->setData(ColName, kFileRole, i);
    item->setText(ColQuant, f.quant.isEmpty() ? tr("?") : f.quant);
    item->setText(ColSize, f.size_bytes > 0 ? humanBytes(uint64_t(f.size_bytes)) : tr("unknown"));
    item->setText(ColChecksum, f.sha256.isEmpty() ? tr("size only") : tr("SHA-256"));
    QString fit_short, fit_long;
    if (f.split_parts > 1) {
      fit_short = tr("split in %1 files: not supported yet").arg(f.split_parts);
      fit_long = fit_short;
    } else if (!f.quant.isEmpty() && !engineRunsQuant(f.quant)) {
      fit_short = tr("%1: not computed by this engine yet").arg(f.quant);
      fit_long = fit_short;
    } else if (repo.shape.isEmpty()) {
      fit_short = tr("unknown shape: checked after download");
      fit_long =
          tr("The model's size preset is not known from its name; its fit is shown once it is "
             "downloaded (Models view).");
    } else {
      try {
        const CatalogFit fit = estimateCatalogFit(f.toCatalogEntry(wizard_.hubBase(), repo),
                                                  wizard_.planRequest(), wizard_.device());
        fit_short = fit.shortSummary();
        fit_long = fit.summary();
      } catch (const std::exception& e) {
        fit_short = tr("cannot estimate");
        fit_long = tr("Cannot estimate the fit: %1").arg(QString::fromUtf8(e.what()));
      }
    }
    item->setText(ColFit, fit_short);
    item->setToolTip(
        ColFit,
        tr("%1 (%2, %3)\nFit: %4\nSize: %5\nAfter download: %6")
            .arg(f.fileName(), repo.family, f.quant.isEmpty() ? tr("quant unknown") : f.quant, fit_long,
                 f.size_bytes > 0 ? tr("%1 bytes (from the hub)").arg(f.size_bytes) : tr("unknown"),
                 f.sha256.isEmpty() ? tr("size checked only") : tr("SHA-256 checked")));
    const bool usable = f.split_parts == 1 && (f.quant.isEmpty() || engineRunsQuant(f.quant));
    if (!usable) item->setFlags(item->flags() & ~Qt::ItemIsSelectable);
  }
  parent->setExpanded(true);
  status_->setText(files.isEmpty() ? tr("%1 has no .gguf file.").arg(repo_id)
                                   : tr("%1: %n GGUF file(s).", nullptr, int(files.size())).arg(repo_id));
}

const HubFile* HubSearchPage::selectedFile() const {
  const auto items = results_->selectedItems();
  if (items.isEmpty() || !items.front()->parent()) return nullptr;
  const QString repo = items.front()->data(ColName, kRepoRole).toString();
  const int i = items.front()->data(ColName, kFileRole).toInt();
  const auto it = files_.find(repo);
  return it == files_.end() || i < 0 || i >= it->size() ? nullptr : &(*it)[i];
}

bool HubSearchPage::isComplete() const { return selectedFile() != nullptr; }

bool HubSearchPage::validatePage() {
  const HubFile* f = selectedFile();
  if (!f) return false;
  const CatalogEntry e = f->toCatalogEntry(wizard_.hubBase(), repos_[f->repo]);
  const QString err = wizard_.startDownload(QUrl(e.url), f->fileName(), e.sha256, e.size_bytes, e.id);
  error_->setText(err);
  return err.isEmpty();
}

}  // namespace moe
