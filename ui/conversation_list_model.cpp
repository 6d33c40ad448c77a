#include "ui/conversation_list_model.h"

#include <QFont>
#include <QGuiApplication>
#include <QIcon>
#include <QPainter>
#include <QPalette>
#include <QPixmap>
#include <set>

namespace moe {
namespace {

QString fromStd(const std::string& s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

QString plainSnippet(const std::string& snippet) {
  QString s = fromStd(snippet);
  s.replace(QChar(kMatchBegin), "»");
  s.replace(QChar(kMatchEnd), "«");
  return s.simplified();
}

}  // namespace

ConversationListModel::ConversationListModel(ConversationStore& store, QObject* parent, Now now)
    : QAbstractListModel(parent),
      store_(store),
      now_(now ? std::move(now) : [] { return QDateTime::currentDateTime(); }) {
  reload();
}

QString ConversationListModel::groupFor(const QDateTime& t, const QDateTime& now) {
  const qint64 days = t.date().daysTo(now.date());
  if (days <= 0) return "Today";
  if (days == 1) return "Yesterday";
  if (days < 7) return "Previous 7 days";
  if (days < 30) return "Previous 30 days";
  return "Older";
}

std::vector<ConversationListModel::Row> ConversationListModel::buildRows() const {
  std::vector<Row> rows;
  if (!query_.trimmed().isEmpty()) {
    std::set<int64_t> seen;
    for (const auto& hit : store_.search(query_.toStdString(), 100)) {
      if (!seen.insert(hit.conversation_id).second) continue;
      Row r;
      r.id = hit.conversation_id;
      r.text = fromStd(hit.conversation_title);
      r.snippet = plainSnippet(hit.snippet);
      r.message_id = hit.message_id;
      rows.push_back(r);
    }
    return rows;
  }
  const QDateTime now = now_();
  QString group;
  for (const auto& c : store_.list()) {
    const QDateTime updated = QDateTime::fromMSecsSinceEpoch(c.updated_at);
    const QString g = groupFor(updated, now);
    if (g != group) {
      group = g;
      rows.push_back(Row{true, 0, g, {}, {}});
    }
    rows.push_back(Row{false, c.id, fromStd(c.title), {}, updated});
  }
  return rows;
}

void ConversationListModel::reload() {
  beginResetModel();
  rows_ = buildRows();
  endResetModel();
}

void ConversationListModel::setSearch(const QString& query) {
  query_ = query;
  reload();
}

// A filled dot in the palette's highlight colour: the chat that is answering.
QIcon ConversationListModel::answeringIcon() {
  QPixmap dot(12, 12);
  dot.fill(Qt::transparent);
  QPainter p(&dot);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  p.setBrush(QGuiApplication::palette().color(QPalette::Highlight));
  p.drawEllipse(QRectF(2, 2, 8, 8));
  return QIcon(dot);
}

void ConversationListModel::setAnswering(qint64 conversation_id) {
  if (conversation_id == answering_) return;
  const qint64 before = answering_;
  answering_ = conversation_id;
  for (qint64 id : {before, conversation_id}) {
    const int row = rowOf(id);
    if (id && row >= 0)
      emit dataChanged(index(row), index(row),
                       {Qt::DecorationRole, Qt::FontRole, Qt::ToolTipRole, AnsweringRole});
  }
}

int ConversationListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole: return r.text;
    case Qt::ToolTipRole:
      if (r.header) return {};
      if (!r.header && r.id == answering_) return QStringLiteral("Answering now");
      if (!r.snippet.isEmpty()) return r.snippet;
      return r.updated.toString("yyyy-MM-dd hh:mm");
    case Qt::DecorationRole:
      if (!r.header && r.id == answering_) return answeringIcon();
      return {};
    case Qt::FontRole:
      if (r.header) {
        QFont f;
        f.setBold(true);
        f.setPointSizeF(f.pointSizeF() * 0.85);
        return f;
      }
      if (r.id == answering_) {
        QFont f;
        f.setItalic(true);
        return f;
      }
      return {};
    case AnsweringRole: return !r.header && r.id == answering_;
    case IdRole: return r.id;
    case IsHeaderRole: return r.header;
    case SnippetRole: return r.snippet;
    case UpdatedRole: return r.updated;
    case MessageIdRole: return r.message_id;
  }
  return {};
}

bool ConversationListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !editable_ || !checkIndex(index, CheckIndexOption::IndexIsValid)) return false;
  Row& r = rows_[static_cast<size_t>(index.row())];
  const QString title = value.toString().simplified();
  if (r.header || title.isEmpty() || title == r.text) return false;
  if (!store_.rename(r.id, title.toStdString())) return false;
  r.text = title;
  emit dataChanged(index, index, {Qt::DisplayRole, Qt::EditRole});
  return true;
}

Qt::ItemFlags ConversationListModel::flags(const QModelIndex& index) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return Qt::NoItemFlags;
  if (rows_[static_cast<size_t>(index.row())].header) return Qt::ItemNeverHasChildren;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemNeverHasChildren |
         (editable_ ? Qt::ItemIsEditable : Qt::NoItemFlags);
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
  auto names = QAbstractListModel::roleNames();
  names[IdRole] = "conversationId";
  names[IsHeaderRole] = "isHeader";
  names[SnippetRole] = "snippet";
  names[UpdatedRole] = "updated";
  names[MessageIdRole] = "messageId";
  return names;
}

int ConversationListModel::rowOf(qint64 conversation_id) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (!rows_[i].header && rows_[i].id == conversation_id) return static_cast<int>(i);
  return -1;
}

qint64 ConversationListModel::idAt(int row) const {
  if (row < 0 || row >= rowCount()) return 0;
  return rows_[static_cast<size_t>(row)].id;
}

qint64 ConversationListModel::messageIdAt(int row) const {
  if (row < 0 || row >= rowCount()) return 0;
  return rows_[static_cast<size_t>(row)].message_id;
}

}  // namespace moe
