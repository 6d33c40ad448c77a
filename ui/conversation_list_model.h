// The conversation list: live conversations grouped under date headers (Today,
// Yesterday, Previous 7 days, Previous 30 days, Older), or, while a search is
// active, the conversations whose messages match, with a snippet. Header rows
// are neither selectable nor editable; editing a conversation's title renames
// it in the store. Changes only on the GUI thread.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QIcon>
#include <functional>
#include <vector>

#include "app/core/conversation_store.h"

namespace moe {

class ConversationListModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Roles {
    IdRole = Qt::UserRole + 1,
    IsHeaderRole,
    SnippetRole,
    UpdatedRole,
    MessageIdRole,
    AnsweringRole
  };
  using Now = std::function<QDateTime()>;

  explicit ConversationListModel(ConversationStore& store, QObject* parent = nullptr, Now now = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QHash<int, QByteArray> roleNames() const override;

  // Re-reads the store (keeps the current search).
  void reload();
  // False: titles cannot be edited in place (a database that may not be written).
  void setEditable(bool editable) { editable_ = editable; }
  void setSearch(const QString& query);
  QString search() const { return query_; }
  int rowOf(qint64 conversation_id) const;  // -1 when not shown
  qint64 idAt(int row) const;
  // A search result's best-matching message (its snippet's); 0 for other rows.
  qint64 messageIdAt(int row) const;
  // The conversation whose reply is streaming (0: none): its row is marked.
  void setAnswering(qint64 conversation_id);
  qint64 answering() const { return answering_; }

  // The date group a conversation updated at `t` falls in, seen from `now`.
  static QString groupFor(const QDateTime& t, const QDateTime& now);

 private:
  static QIcon answeringIcon();
  struct Row {
    bool header = false;
    qint64 id = 0;
    QString text;     // title or group name
    QString snippet;  // search results only
    QDateTime updated;
    qint64 message_id = 0;  // search results only: the message the snippet is from
  };
  std::vector<Row> buildRows() const;

  ConversationStore& store_;
  Now now_;
  QString query_;
  bool editable_ = true;
  qint64 answering_ = 0;
  std::vector<Row> rows_;
};

}  // namespace moe
