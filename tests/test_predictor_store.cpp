// Trained predictors in the app database (a real SQLite file): a set saved and
// loaded back is byte-exact per layer, keyed by model hash and distance;
// saving again replaces the set; export/import through one file; and a set
// survives closing and reopening the database.
#include <QtTest>

#include <QTemporaryDir>
#include <fstream>

#include "app/core/app_database.h"
#include "app/core/predictor_store.h"

using namespace moe;

namespace {

MlpPredictor layer(int l, int distance, float seed) {
  MlpPredictor p;
  p.layer = l;
  p.target_layer = l + distance;
  p.n_in = 12, p.n_hidden = 5, p.n_out = 8, p.k = 2;
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (size_t i = 0; i < n; ++i) v[i] = seed * float(i) - 1.0f / float(i + 3);  // not round in binary
  };
  fill(p.w1, 60);
  fill(p.b1, 5);
  fill(p.w2, 40);
  fill(p.b2, 8);
  return p;
}

PredictorSet set(const std::string& sha, int distance, float seed) {
  PredictorSet s;
  s.model_sha256 = sha;
  s.distance = distance;
  s.trained_on = "built-in prompts";
  s.token_count = 4321;
  for (int l = 0; l < 3; ++l) {
    s.layers.push_back(layer(l, distance, seed + l));
    s.val_accuracy.push_back(0.5 + 0.1 * l);
  }
  return s;
}

}  // namespace

class PredictorStoreTest : public QObject {
  Q_OBJECT
 private slots:
  void roundTripIsBitExact() {
    QTemporaryDir dir;
    const std::string db_path = dir.filePath("moechat.db").toStdString();
    const std::string sha(64, 'e');
    const auto a = set(sha, 2, 0.37f);
    {
      auto db = AppDatabase::open(db_path);
      PredictorStore store(db);
      store.save(a);
      store.save(set(sha, 1, 0.11f));
      store.save(set(std::string(64, 'f'), 2, 0.5f));
    }
    auto db = AppDatabase::open(db_path);  // reopened: it is on disk
    PredictorStore store(db);
    const auto back = store.load(std::string(64, 'E'), 2);  // the hash is matched case-insensitively
    QVERIFY(back.has_value());
    QCOMPARE(back->layers.size(), a.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) QVERIFY(back->layers[i].toBlob() == a.layers[i].toBlob());
    QCOMPARE(back->trained_on, a.trained_on);
    QCOMPARE(back->token_count, a.token_count);
    QCOMPARE(back->val_accuracy, a.val_accuracy);
    const auto info = store.list(sha);
    QCOMPARE(info.size(), size_t(2));
    QCOMPARE(info[0].distance, 1);
    QCOMPARE(info[1].layers, 3);
    QVERIFY(std::abs(info[1].mean_accuracy - 0.6) < 1e-9);
    QVERIFY(!store.load(sha, 3).has_value());
    QCOMPARE(db.db().queryInt64("SELECT COUNT(*) FROM predictors"), int64_t(9));
  }

  void saveReplacesAndRemove() {
    QTemporaryDir dir;
    auto db = AppDatabase::open(dir.filePath("m.db").toStdString());
    PredictorStore store(db);
    const std::string sha(64, 'a');
    store.save(set(sha, 2, 0.1f));
    auto smaller = set(sha, 2, 0.9f);
    smaller.layers.resize(1);
    smaller.val_accuracy.resize(1);
    store.save(smaller);
    const auto back = store.load(sha, 2);
    QCOMPARE(back->layers.size(), size_t(1));
    QVERIFY(back->layers[0].toBlob() == smaller.layers[0].toBlob());
    QCOMPARE(store.remove(sha, 2), 1);
    QVERIFY(!store.load(sha, 2).has_value());
    PredictorSet empty;
    empty.model_sha256 = sha;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.save(empty));
    auto bad = set("not-a-hash", 2, 0.1f);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.save(bad));
  }

  void exportImportOneFile() {
    QTemporaryDir dir;
    const std::string sha(64, 'b');
    const std::string file = dir.filePath("shared.moepred").toStdString();
    {
      auto db = AppDatabase::open(dir.filePath("one.db").toStdString());
      PredictorStore store(db);
      store.save(set(sha, 2, 0.25f));
      store.exportSet(sha, 2, file);
      QVERIFY_THROWS_EXCEPTION(std::runtime_error, store.exportSet(sha, 3, file + ".x"));
    }
    auto db = AppDatabase::open(dir.filePath("two.db").toStdString());  // another user's database
    PredictorStore store(db);
    const auto imported = store.importSet(file);
    QCOMPARE(imported.model_sha256, sha);
    const auto back = store.load(sha, 2);
    QVERIFY(back.has_value());
    for (size_t i = 0; i < back->layers.size(); ++i)
      QVERIFY(back->layers[i].toBlob() == set(sha, 2, 0.25f).layers[i].toBlob());
    // A damaged file is refused and stores nothing.
    std::ofstream(file, std::ios::binary | std::ios::trunc) << "MOEPREDS broken";
    QVERIFY_THROWS_EXCEPTION(PredictorFormatError, store.importSet(file));
    QCOMPARE(store.list(sha).size(), size_t(1));
  }
};

QTEST_APPLESS_MAIN(PredictorStoreTest)
#include "test_predictor_store.moc"
