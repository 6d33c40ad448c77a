// The stores over a real SQLite file: downloads and installed models.
#include <QtTest>

#include <QTemporaryDir>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"

using moe::AppDatabase;

namespace {

std::string sha(char c) { return std::string(64, c); }

}  // namespace

class PersistStoreTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string dbPath(const char* name) { return dir_.filePath(name).toStdString(); }

 private slots:
  void downloadsRoundTripAndSurviveReopen() {
    const std::string path = dbPath("downloads.db");
    int64_t a = 0, b = 0;
    {
      AppDatabase adb = AppDatabase::open(path);
      moe::DownloadStore store(adb);
      moe::DownloadRecord rec;
      rec.url = "https://example.org/a.gguf";
      rec.dest_path = "/models/a.gguf";
      rec.sha256 = std::string(64, 'A');  // upper case is accepted, stored lower case
      rec.expected_size = 1000;
      rec.catalog_id = "qwen-a";
      a = store.add(rec);
      rec.url = "https://example.org/b.gguf";
      rec.dest_path = "/models/b.gguf";
      rec.sha256.clear();
      rec.expected_size = -7;  // "unknown" in any negative spelling
      b = store.add(rec);
      QVERIFY(a > 0 && b > a);

      auto got = store.get(a);
      QVERIFY(got.has_value());
      QCOMPARE(got->state, std::string("queued"));
      QCOMPARE(got->sha256, sha('a'));
      QCOMPARE(got->expected_size, int64_t(1000));
      QVERIFY(got->created_at > 0 && got->updated_at == got->created_at);
      QCOMPARE(store.get(b)->expected_size, int64_t(-1));

      QVERIFY(store.setState(a, "running"));
      QVERIFY(store.setBytesDone(a, 400));
      QVERIFY(store.update(b, "failed", 10, "HTTP 404"));
      QVERIFY(!store.setState(9999, "running"));  // unknown id: reported, not thrown
      QVERIFY(!store.setBytesDone(9999, 1));
    }
    // A restart finds the queue as it was left.
    AppDatabase adb = AppDatabase::open(path);
    moe::DownloadStore store(adb);
    auto pending = store.unfinished();
    QCOMPARE(pending.size(), size_t(2));
    QCOMPARE(pending[0].id, a);
    QCOMPARE(pending[0].state, std::string("running"));
    QCOMPARE(pending[0].bytes_done, int64_t(400));
    QCOMPARE(pending[1].state, std::string("failed"));
    QCOMPARE(pending[1].error, std::string("HTTP 404"));

    QVERIFY(store.update(a, "done", 1000));
    pending = store.unfinished();
    QCOMPARE(pending.size(), size_t(1));
    QCOMPARE(pending[0].id, b);
    QCOMPARE(store.all().size(), size_t(2));
    QVERIFY(store.remove(b));
    QVERIFY(!store.remove(b));
    QVERIFY(!store.get(b).has_value());
    QVERIFY(store.unfinished().empty());
  }

  void downloadsRejectBadInput() {
    AppDatabase adb = AppDatabase::open(dbPath("downloads-bad.db"));
    moe::DownloadStore store(adb);
    moe::DownloadRecord rec;
    rec.url = "https://example.org/a.gguf";
    rec.dest_path = "/models/a.gguf";
    int64_t id = store.add(rec);
    auto bad = rec;
    bad.state = "exploded";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad = rec;
    bad.sha256 = "abc";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad.sha256 = std::string(63, 'a') + "g";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad = rec;
    bad.url.clear();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.setState(id, "RUNNING"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.setBytesDone(id, -1));
    QCOMPARE(store.all().size(), size_t(1));
    QCOMPARE(store.get(id)->state, std::string("queued"));
  }

  void modelsUpsertByPath() {
    AppDatabase adb = AppDatabase::open(dbPath("models.db"));
    moe::ModelRegistry reg(adb);
    moe::ModelRecord m;
    m.path = "/models/b.gguf";
    m.name = "Beta";
    m.arch = "qwen2moe";
    m.quant = "Q4_K";
    m.size_bytes = 123;
    int64_t b = reg.upsert(m);
    m.path = "/models/a.gguf";
    m.name = "Alpha";
    m.sha256 = sha('c');
    int64_t a = reg.upsert(m);
    QVERIFY(a != b);
    const int64_t added = reg.findByPath("/models/a.gguf")->added_at;
    QVERIFY(added > 0);

    // Same path again: the row is updated in place (same id, same added_at).
    m.name = "Alpha v2";
    m.size_bytes = 456;
    m.sha256 = std::string(64, 'C');
    QCOMPARE(reg.upsert(m), a);
    auto got = reg.findByPath("/models/a.gguf");
    QVERIFY(got.has_value());
    QCOMPARE(got->name, std::string("Alpha v2"));
    QCOMPARE(got->size_bytes, int64_t(456));
    QCOMPARE(got->sha256, sha('c'));
    QCOMPARE(got->added_at, added);

    auto all = reg.list();
    QCOMPARE(all.size(), size_t(2));
    QCOMPARE(all[0].name, std::string("Alpha v2"));  // by name
    QCOMPARE(all[1].name, std::string("Beta"));

    // A copy of the same file elsewhere shares the hash.
    m.path = "/backup/a.gguf";
    reg.upsert(m);
    QCOMPARE(reg.findBySha256(std::string(64, 'C')).size(), size_t(2));
    QVERIFY(reg.findBySha256(sha('d')).empty());
    QVERIFY(reg.findBySha256("").empty());  // "not hashed" never matches the unhashed Beta
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, reg.findBySha256("zz"));

    QVERIFY(reg.remove(b));
    QVERIFY(!reg.remove(b));
    QVERIFY(!reg.findByPath("/models/b.gguf").has_value());
    m.path.clear();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, reg.upsert(m));
  }
};

QTEST_GUILESS_MAIN(PersistStoreTest)
#include "test_persist_store.moc"
