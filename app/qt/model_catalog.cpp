#include "app/qt/model_catalog.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>
#include <QUrl>

#include "app/core/fit_words.h"
#include "offload/host_expert_store.h"
#include "synth/synthetic_model.h"

namespace moe {

namespace {

using gguf::TensorType;

[[noreturn]] void bad(const QString& where, const QString& what) {
  throw CatalogError(QStringLiteral("catalog %1: %2").arg(where, what).toStdString());
}

QString requiredString(const QJsonObject& o, const char* key, const QString& where) {
  const QJsonValue v = o.value(QLatin1String(key));
  if (!v.isString() || v.toString().trimmed().isEmpty())
    bad(where, QStringLiteral("'%1' missing or empty").arg(key));
  return v.toString().trimmed();
}

CatalogEntry parseEntry(const QJsonObject& o, int index) {
  QString where = QStringLiteral("entry %1").arg(index);
  CatalogEntry e;
  e.id = requiredString(o, "id", where);
  where = QStringLiteral("entry '%1'").arg(e.id);
  e.name = requiredString(o, "name", where);
  e.family = requiredString(o, "family", where);
  e.quant = requiredString(o, "quant", where);
  e.shape = requiredString(o, "shape", where);
  e.url = requiredString(o, "url", where);
  e.licence = requiredString(o, "licence", where);
  e.needs = o.value(QStringLiteral("needs")).toString();
  e.sha256 = o.value(QStringLiteral("sha256")).toString().trimmed().toLower();
  const QJsonValue size = o.value(QStringLiteral("size_bytes"));
  if (size.isDouble() && size.toDouble() > 0)
    e.size_bytes = qint64(size.toDouble());
  else if (!size.isNull() && !size.isUndefined())
    bad(where, QStringLiteral("'size_bytes' must be a positive number or null"));

  const QUrl url(e.url);
  if (!url.isValid() || (url.scheme() != QStringLiteral("https") && url.scheme() != QStringLiteral("http")))
    bad(where, QStringLiteral("'url' is not an http(s) URL: %1").arg(e.url));
  static const QRegularExpression kHex(QStringLiteral("^[0-9a-f]{64}$"));
  if (!e.sha256.isEmpty() && !kHex.match(e.sha256).hasMatch())
    bad(where, QStringLiteral("'sha256' is not 64 hex digits: %1").arg(e.sha256));
  const auto presets = synth::presetNames();
  if (std::find(presets.begin(), presets.end(), e.shape.toStdString()) == presets.end())
    bad(where, QStringLiteral("unknown shape '%1'").arg(e.shape));
  return e;
}

// Bytes of `elems` elements of `t` (block types: elements / block x block bytes;
// real files pad rows that do not divide, which this ignores: an estimate).
double bytesOf(double elems, TensorType t) {
  const auto tr = gguf::typeTraits(uint32_t(t));
  return elems * tr->block_bytes / tr->block_elems;
}

// The element types a quant name implies: experts' gate/up, experts' down, and
// the other matrices. Q4_K_M mixes Q4_K with Q6_K (llama.cpp gives ffn_down and
// the output more bits); here down and output are counted as Q6_K, the rest Q4_K.
struct QuantTypes {
  TensorType expert, expert_down, other, output;
};
QuantTypes quantTypes(const QString& quant) {
  if (quant == QStringLiteral("Q8_0"))
    return {TensorType::Q8_0, TensorType::Q8_0, TensorType::Q8_0, TensorType::Q8_0};
  if (quant == QStringLiteral("Q4_0"))
    return {TensorType::Q4_0, TensorType::Q4_0, TensorType::Q4_0, TensorType::Q6_K};
  if (quant == QStringLiteral("Q4_K_M"))
    return {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q4_K, TensorType::Q6_K};
  if (quant == QStringLiteral("F16"))
    return {TensorType::F16, TensorType::F16, TensorType::F16, TensorType::F16};
  if (quant == QStringLiteral("BF16"))
    return {TensorType::BF16, TensorType::BF16, TensorType::BF16, TensorType::BF16};
  throw CatalogError("no size model for quant type " + quant.toStdString());
}

ModelConfig configOf(const synth::SyntheticSpec& s) {
  ModelConfig c;
  c.arch_name = s.arch;
  c.model_name = s.name;
  c.n_vocab = s.n_vocab_target;
  c.n_ctx_train = s.n_ctx;
  c.n_layer = s.n_layer;
  c.n_embd = s.n_embd;
  c.n_head = s.n_head;
  c.n_head_kv = s.n_head_kv;
  c.head_dim = s.head_dim;
  c.n_ff = s.n_ff;
  c.n_expert = s.n_expert;
  c.n_expert_used = s.n_expert_used;
  c.n_ff_exp = s.n_ff_exp;
  c.n_expert_shared = s.n_expert_shared;
  c.n_ff_shexp = s.n_ff_shexp;
  c.n_leading_dense = s.n_leading_dense;
  if (s.full_attn_interval > 0) {  // qwen35moe: gated delta-net layers, every interval-th one attention
    c.delta.conv_kernel = s.ssm_conv_kernel;
    c.delta.head_k = c.delta.head_v = s.ssm_state;
    c.delta.n_k_heads = s.ssm_k_heads;
    c.delta.n_v_heads = s.ssm_v_heads;
    c.recurrent.assign(size_t(s.n_layer), 0);
    for (int l = 0; l < s.n_layer; ++l) c.recurrent[size_t(l)] = (l + 1) % s.full_attn_interval != 0 ? 1 : 0;
  }
  return c;
}

ModelSizes sizesOf(const synth::SyntheticSpec& s, const QuantTypes& q) {
  const double d = s.n_embd, qw = double(s.n_head) * s.head_dim, kvw = double(s.n_head_kv) * s.head_dim;
  ModelSizes z;
  z.moe_layers = s.n_layer - s.n_leading_dense;
  z.expert_bytes = uint64_t(2 * bytesOf(d * s.n_ff_exp, q.expert) + bytesOf(d * s.n_ff_exp, q.expert_down));
  z.routed_expert_bytes = z.expert_bytes * uint64_t(s.n_expert) * uint64_t(z.moe_layers);
  double other = bytesOf(d * s.n_vocab_target, q.other);                       // token_embd
  if (!s.tied_output) other += bytesOf(d * s.n_vocab_target, q.output);        // output
  const double attn = bytesOf(d * (2 * qw + 2 * kvw), q.other) + 4 * (2 * d);  // q,k,v,o + norms
  const double dense_ffn = bytesOf(3 * d * s.n_ff, q.other);
  const double moe_fixed = 4 * d * s.n_expert + bytesOf(3 * d * s.n_ff_shexp, q.other);  // router + shared
  if (s.full_attn_interval > 0) {
    // qwen35moe: the attention layers' q carries a gate (2 x qw); a delta-net layer has
    // attn_qkv (2 key + value), attn_gate and ssm_out (value), F32 alpha and beta.
    const int n_attention = s.n_layer / s.full_attn_interval;
    const double key = double(s.ssm_k_heads) * s.ssm_state, value = double(s.ssm_v_heads) * s.ssm_state;
    const double gated_attn = bytesOf(d * (3 * qw + 2 * kvw), q.other) + 4 * (2 * d);
    const double delta = bytesOf(d * (2 * key + 3 * value), q.other) + 4 * (2 * d * s.ssm_v_heads + 2 * d);
    other +=
        n_attention * gated_attn + (s.n_layer - n_attention) * delta + z.moe_layers * (moe_fixed + 4 * d);
  } else {
    other += s.n_layer * attn + s.n_leading_dense * dense_ffn + z.moe_layers * moe_fixed;
  }
  z.other_bytes = uint64_t(other);
  return z;
}

}  // namespace

QString humanBytes(uint64_t b) { return QString::fromStdString(formatBytes(b)); }

QString CatalogEntry::fileName() const { return QUrl(url).fileName(); }

QString CatalogEntry::checksumNote() const {
  if (hasChecksum()) return QStringLiteral("SHA-256 checked");
  if (size_bytes > 0) return QStringLiteral("no published checksum: size checked only");
  return QStringLiteral("no published checksum or size: the file is checked as a GGUF only");
}

QString CatalogEntry::checksumShort() const {
  if (hasChecksum()) return QStringLiteral("SHA-256");
  return size_bytes > 0 ? QStringLiteral("size only") : QStringLiteral("none");
}

ModelCatalog ModelCatalog::fromJson(const QByteArray& json) {
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &err);
  if (doc.isNull())
    throw CatalogError(QStringLiteral("catalog: not JSON (%1 at offset %2)")
                           .arg(err.errorString())
                           .arg(err.offset)
                           .toStdString());
  const QJsonValue models = doc.object().value(QStringLiteral("models"));
  if (!models.isArray()) throw CatalogError("catalog: no 'models' array");
  ModelCatalog c;
  QSet<QString> ids;
  int i = 0;
  for (const QJsonValue& v : models.toArray()) {
    if (!v.isObject()) bad(QStringLiteral("entry %1").arg(i), QStringLiteral("not an object"));
    CatalogEntry e = parseEntry(v.toObject(), i++);
    if (ids.contains(e.id)) bad(QStringLiteral("entry '%1'").arg(e.id), QStringLiteral("duplicate id"));
    ids.insert(e.id);
    c.entries_.append(e);
  }
  return c;
}

ModelCatalog ModelCatalog::builtIn() {
  QFile f(QStringLiteral(":/catalog.json"));
  if (!f.open(QIODevice::ReadOnly)) throw CatalogError("the built-in catalog (:/catalog.json) is missing");
  return fromJson(f.readAll());
}

const CatalogEntry* ModelCatalog::find(const QString& id) const {
  for (const auto& e : entries_)
    if (e.id == id) return &e;
  return nullptr;
}

void ModelCatalog::add(const CatalogEntry& e) {
  for (auto& x : entries_)
    if (x.id == e.id) {
      x = e;
      return;
    }
  entries_.append(e);
}

CatalogFit estimateCatalogFit(const CatalogEntry& entry, const PlanRequest& request,
                              const DeviceMemory& device, uint64_t ram_available) {
  const synth::SyntheticSpec spec = synth::presetSpec(entry.shape.toStdString());
  const QuantTypes q = quantTypes(entry.quant);
  ModelShape shape;
  shape.config = configOf(spec);
  shape.sizes = sizesOf(spec, q);
  shape.host_store_bytes = shape.sizes.routed_expert_bytes;
  CatalogFit f;
  f.plan = resolveLoadPlan(request, shape, device);
  f.estimated_file_bytes = shape.sizes.other_bytes + shape.sizes.routed_expert_bytes;
  f.ram_available = ram_available ? ram_available : HostExpertStore::availableRam();
  // HostExpertStore::checkFits keeps 1 GiB for the rest of the system; so does this.
  f.ram_ok = f.ram_available == 0 || f.plan.fit.host_pinned_bytes + (1ull << 30) <= f.ram_available;
  return f;
}

QString CatalogFit::shortSummary() const {
  QString s = QString::fromStdString(planShort(plan));
  if (!ram_ok) s += QStringLiteral("; RAM too small");
  return s;
}

QString CatalogFit::summary() const {
  if (!plan.loads()) return QString::fromStdString(plan.error);
  QString s;
  if (plan.onCpuOnly())
    s = QStringLiteral("runs on the CPU (no GPU): experts computed from host RAM");
  else if (plan.cache_slots == 0)
    s = QStringLiteral("%1 %2 + all %3 experts")
            .arg(plan.simulated ? QStringLiteral("simulated GPU (host memory, no GPU)")
                                : QStringLiteral("GPU"))
            .arg(humanBytes(plan.fit.fixedBytes()))
            .arg(plan.fit.total_experts);
  else
    s = QStringLiteral("%1 %2 + cache %3 of %4 experts (%5%)")
            .arg(plan.simulated ? QStringLiteral("simulated GPU (host memory, no GPU)")
                                : QStringLiteral("GPU"))
            .arg(humanBytes(plan.fit.fixedBytes()))
            .arg(plan.cache_slots)
            .arg(plan.fit.total_experts)
            .arg(100.0 * plan.cacheShare(), 0, 'f', 0);
  s += QStringLiteral("; pinned RAM %1").arg(humanBytes(plan.fit.host_pinned_bytes));
  if (ram_available == 0)
    s += QStringLiteral(" (available RAM unknown)");
  else
    s += ram_ok ? QStringLiteral(" (%1 available)").arg(humanBytes(ram_available))
                : QStringLiteral(" - NOT enough: %1 available").arg(humanBytes(ram_available));
  return s;
}

}  // namespace moe
