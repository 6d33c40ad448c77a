#include "app/qt/sampling_json.h"

#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace moe {

std::optional<SamplingDefaults> samplingFromJson(const std::string& json) {
  const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(json));
  if (!doc.isObject() || doc.object().isEmpty()) return std::nullopt;
  const auto o = doc.object();
  SamplingDefaults s;
  s.temperature = o.value("temperature").toDouble(s.temperature);
  s.top_p = o.value("top_p").toDouble(s.top_p);
  s.top_k = o.value("top_k").toInt(s.top_k);
  s.min_p = o.value("min_p").toDouble(s.min_p);
  s.repeat_penalty = o.value("repeat_penalty").toDouble(s.repeat_penalty);
  s.max_tokens = o.value("max_tokens").toInt(s.max_tokens);
  return withinRanges(s);
}

std::string samplingToJson(const SamplingDefaults& s) {
  QJsonObject o;
  o["temperature"] = s.temperature;
  o["top_p"] = s.top_p;
  o["top_k"] = s.top_k;
  o["min_p"] = s.min_p;
  o["repeat_penalty"] = s.repeat_penalty;
  o["max_tokens"] = s.max_tokens;
  return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

std::string replySamplingJson(const SamplingDefaults& s, uint64_t seed) {
  QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(samplingToJson(s))).object();
  o["seed"] = QString::number(seed);  // a string: JSON numbers lose 64-bit integers
  return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

}  // namespace moe
