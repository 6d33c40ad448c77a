// Typed access to the user's settings, with a change signal per group. Built on
// a QSettings the caller owns and passes in (an INI file in a temp folder in
// tests), so nothing reaches for a global instance.
#pragma once

#include <QObject>
#include <QSettings>
#include <QString>

namespace moe {

struct SamplingDefaults {
  double temperature = 0.7;
  double top_p = 0.9;
  int top_k = 40;
  double min_p = 0.05;
  double repeat_penalty = 1.1;
  int max_tokens = 1024;
  // The most a reply may be asked for; the model's context ends a reply sooner.
  static constexpr int kMaxTokensLimit = 1'000'000;
};

// s with every field inside the range the settings form offers: a value that is not
// a finite number takes the default, one outside its range is clamped. Applied to
// whatever is read back from the settings file or a conversation's stored JSON.
SamplingDefaults withinRanges(const SamplingDefaults& s);

class AppSettings : public QObject {
  Q_OBJECT

 public:
  // The caching policies of the offload engine, in the order the UI lists them.
  static QStringList policies();

  explicit AppSettings(QSettings& store, QObject* parent = nullptr);

  // Bytes of GPU memory moechat may use; 0 means "auto" (what the GPU has free,
  // less a safety margin).
  quint64 vramBudgetBytes() const;
  void setVramBudgetBytes(quint64 bytes);

  QString cachePolicy() const;  // one of policies()
  void setCachePolicy(const QString& policy);

  // The context a model is loaded with, in tokens, per model (its file name; the
  // demo's is "demo"): kDefaultContextLength until set, kept within
  // [kMinContextLength, kMaxContextLength] (the model's own limit applies on load).
  static constexpr int kDefaultContextLength = 4096;
  static constexpr int kMinContextLength = 256;
  static constexpr int kMaxContextLength = 1 << 20;
  static QString modelKey(const QString& model_path);  // file name, or "demo" for ""
  int contextLength(const QString& model_path) const;
  void setContextLength(const QString& model_path, int tokens);

  SamplingDefaults sampling() const;
  void setSampling(const SamplingDefaults& s);

  QString modelsFolder() const;
  void setModelsFolder(const QString& dir);
  QString dataFolder() const;
  void setDataFolder(const QString& dir);

  QString theme() const;  // "system", "light" or "dark"
  void setTheme(const QString& theme);

  // Whether the performance strip shows the expert-cache figures (off: the plain ones only).
  bool perfDetails() const;
  void setPerfDetails(bool shown);

  // Models whose template has the switch (Qwen3.5/3.6, MiniMax-M2) reason before they
  // answer; off: they answer at once. On unless the user turns it off.
  bool thinking() const;
  void setThinking(bool on);

  QString lastModelPath() const;  // empty: the demo model
  void setLastModelPath(const QString& path);

  // "Learning from use" (docs/predictor.md): record traces of the user's
  // replies to train a better expert predictor. Off unless the user turns it on.
  bool learnFromUse() const;
  void setLearnFromUse(bool on);
  // Where those traces live: the data folder + "/use-traces".
  QString useTracesFolder() const;
  // Models (SHA-256) the app has already suggested retraining for (said once).
  bool retrainOffered(const QString& model_sha256) const;
  void setRetrainOffered(const QString& model_sha256);

 signals:
  void offloadChanged();
  void samplingChanged();
  void foldersChanged();
  void themeChanged();
  void learnFromUseChanged(bool on);

 private:
  QSettings& store_;
};

}  // namespace moe
