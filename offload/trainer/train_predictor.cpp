#include "offload/trainer/train_predictor.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

#include "offload/expert_predictor.h"

namespace moe {
namespace {

// A fixed mapping from generator bits to numbers, so results do not depend on
// the standard library's distributions (which differ between implementations).
double unit(std::mt19937_64& g) { return double(g() >> 11) * (1.0 / 9007199254740992.0); }

template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& g) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(g() % i)]);
}

struct Dataset {
  std::vector<float> x;  // [n][n_in]
  std::vector<int> y;    // [n][k] expert ids of the target layer
  int n = 0;
};

Dataset loadDataset(const TraceReader& trace, const std::vector<int>& prompts, int layer, int target) {
  Dataset d;
  const int K = trace.header().k;
  for (int p : prompts) {
    auto in = trace.read(p, layer);
    auto out = trace.read(p, target);
    d.x.insert(d.x.end(), in.hidden.begin(), in.hidden.end());
    d.y.insert(d.y.end(), out.experts.begin(), out.experts.begin() + size_t(in.n) * K);
    d.n += in.n;
  }
  return d;
}

struct Adam {
  explicit Adam(size_t n) : m(n, 0.0f), v(n, 0.0f) {}
  void step(std::vector<float>& w, const std::vector<float>& g, float lr, int t) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float c1 = 1.0f - std::pow(b1, float(t)), c2 = 1.0f - std::pow(b2, float(t));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  }
  std::vector<float> m, v;
};

float bce(float z, float y) {  // numerically stable binary cross-entropy on a logit
  return std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z)));
}

struct Eval {
  double loss = 0, accuracy = 0;
};

Eval evaluate(const MlpPredictor& p, const Dataset& d) {
  Eval e;
  if (d.n == 0) return e;
  std::vector<float> h(p.n_hidden), z(p.n_out), y(p.n_out);
  for (int r = 0; r < d.n; ++r) {
    p.forward(d.x.data() + size_t(r) * p.n_in, h.data(), z.data());
    std::fill(y.begin(), y.end(), 0.0f);
    const std::span<const int> truth(d.y.data() + size_t(r) * p.k, p.k);
    for (int t : truth) y[t] = 1;
    for (int o = 0; o < p.n_out; ++o) e.loss += bce(z[o], y[o]);
    e.accuracy += predictionAccuracy(topExperts(z, p.k), truth);
  }
  e.loss /= double(d.n) * p.n_out;
  e.accuracy /= d.n;
  return e;
}

// One epoch of mini-batch Adam; returns the mean training loss.
double trainEpoch(MlpPredictor& p, const Dataset& d, const TrainOptions& o, std::mt19937_64& g,
                  std::vector<Adam>& adam, int& t) {
  const int I = p.n_in, H = p.n_hidden, O = p.n_out;
  std::vector<int> order(d.n);
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, g);
  std::vector<float> gw1(p.w1.size()), gb1(H), gw2(p.w2.size()), gb2(O);
  std::vector<float> h(H), z(O), dz(O), dh(H);
  double loss = 0;
  for (int start = 0; start < d.n; start += o.batch) {
    const int end = std::min(d.n, start + o.batch);
    const float inv = 1.0f / float(end - start);
    std::fill(gw1.begin(), gw1.end(), 0.0f);
    std::fill(gb1.begin(), gb1.end(), 0.0f);
    std::fill(gw2.begin(), gw2.end(), 0.0f);
    std::fill(gb2.begin(), gb2.end(), 0.0f);
    for (int b = start; b < end; ++b) {
      const int r = order[b];
      const float* x = d.x.data() + size_t(r) * I;
      p.forward(x, h.data(), z.data());
      std::fill(dz.begin(), dz.end(), 0.0f);
      for (int k = 0; k < p.k; ++k) dz[d.y[size_t(r) * p.k + k]] = 1.0f;  // dz holds y here
      for (int oi = 0; oi < O; ++oi) {
        loss += bce(z[oi], dz[oi]);
        dz[oi] = (1.0f / (1.0f + std::exp(-z[oi])) - dz[oi]) * inv;
      }
      std::fill(dh.begin(), dh.end(), 0.0f);
      for (int oi = 0; oi < O; ++oi) {
        float* gw = gw2.data() + size_t(oi) * H;
        const float* w = p.w2.data() + size_t(oi) * H;
        for (int j = 0; j < H; ++j) {
          gw[j] += dz[oi] * h[j];
          dh[j] += dz[oi] * w[j];
        }
        gb2[oi] += dz[oi];
      }
      for (int j = 0; j < H; ++j) {
        if (h[j] <= 0) continue;  // ReLU
        float* gw = gw1.data() + size_t(j) * I;
        for (int i = 0; i < I; ++i) gw[i] += dh[j] * x[i];
        gb1[j] += dh[j];
      }
    }
    ++t;
    adam[0].step(p.w1, gw1, o.learning_rate, t);
    adam[1].step(p.b1, gb1, o.learning_rate, t);
    adam[2].step(p.w2, gw2, o.learning_rate, t);
    adam[3].step(p.b2, gb2, o.learning_rate, t);
  }
  return loss / (double(std::max(1, d.n)) * O);
}

void initialise(MlpPredictor& p, std::mt19937_64& g) {
  auto fill = [&](std::vector<float>& w, int fan_in, int fan_out) {
    const double a = std::sqrt(6.0 / (fan_in + fan_out));  // Glorot uniform
    for (float& v : w) v = float((2 * unit(g) - 1) * a);
  };
  p.w1.resize(size_t(p.n_hidden) * p.n_in);
  p.b1.assign(p.n_hidden, 0.0f);
  p.w2.resize(size_t(p.n_out) * p.n_hidden);
  p.b2.assign(p.n_out, 0.0f);
  fill(p.w1, p.n_in, p.n_hidden);
  fill(p.w2, p.n_hidden, p.n_out);
}

}  // namespace

int defaultHiddenWidth(int n_in, int n_out) {
  return std::clamp((1 << 20) / std::max(1, n_in + n_out), 32, 256);
}

PromptSplit splitPrompts(std::vector<int> prompts, uint64_t seed, double val_share, double test_share) {
  if (prompts.size() < 3)
    throw std::invalid_argument("the trace holds " + std::to_string(prompts.size()) +
                                " complete prompts; training needs at least 3 (train, validation, test)");
  std::sort(prompts.begin(), prompts.end());
  std::mt19937_64 g(seed ^ 0x5eedf00dULL);
  shuffle(prompts, g);
  const size_t n = prompts.size();
  const size_t n_val = std::max<size_t>(1, size_t(std::lround(n * val_share)));
  const size_t n_test = std::max<size_t>(1, size_t(std::lround(n * test_share)));
  PromptSplit s;
  s.val.assign(prompts.begin(), prompts.begin() + n_val);
  s.test.assign(prompts.begin() + n_val, prompts.begin() + n_val + n_test);
  s.train.assign(prompts.begin() + n_val + n_test, prompts.end());
  if (s.train.empty()) throw std::invalid_argument("too few prompts left to train on");
  for (auto* v : {&s.train, &s.val, &s.test}) std::sort(v->begin(), v->end());
  return s;
}

TrainResult trainPredictors(const TraceReader& trace, const TrainOptions& o,
                            const std::function<void(const TrainProgress&)>& on_progress,
                            const std::atomic<bool>* cancel) {
  if (o.distance < 1 || o.distance > 3) throw std::invalid_argument("distance must be 1, 2 or 3");
  if (o.max_epochs < 1 || o.batch < 1 || o.hidden < 0) throw std::invalid_argument("bad training options");
  const TraceHeader& h = trace.header();
  std::vector<std::pair<int, int>> pairs;  // (layer, target)
  for (int l : h.moe_layers)
    if (std::find(h.moe_layers.begin(), h.moe_layers.end(), l + o.distance) != h.moe_layers.end())
      pairs.push_back({l, l + o.distance});
  if (pairs.empty())
    throw std::invalid_argument("the model has no pair of MoE layers " + std::to_string(o.distance) +
                                " apart");
  const PromptSplit split = splitPrompts(trace.prompts(), o.seed, o.val_share, o.test_share);

  TrainResult result;
  PredictorSet& set = result.set;
  set.model_sha256 = h.model_sha256;
  set.model_name = h.model_name;
  set.distance = o.distance;
  set.trained_on = o.trained_on;
  set.seed = o.seed;
  set.train_prompts = split.train;
  set.val_prompts = split.val;
  set.test_prompts = split.test;
  for (int p : split.train) set.token_count += trace.tokenCount(p);

  std::vector<MlpPredictor> trained(pairs.size());
  std::vector<double> accuracy(pairs.size(), -1);
  std::vector<char> finished(pairs.size(), 0);
  std::mutex mu;
  int layers_done = 0;
  std::atomic<size_t> next{0};
  auto stop = [&] { return cancel && cancel->load(); };
  auto worker = [&] {
    for (size_t i; (i = next++) < pairs.size() && !stop();) {
      const auto [layer, target] = pairs[i];
      const Dataset train = loadDataset(trace, split.train, layer, target);
      const Dataset val = loadDataset(trace, split.val, layer, target);
      MlpPredictor p;
      p.layer = layer;
      p.target_layer = target;
      p.n_in = h.n_embd;
      p.n_out = h.n_expert;
      p.k = h.k;
      p.n_hidden = o.hidden > 0 ? o.hidden : defaultHiddenWidth(h.n_embd, h.n_expert);
      std::mt19937_64 g(o.seed * 0x9e3779b97f4a7c15ULL + uint64_t(layer) * 1315423911ULL + 1);
      initialise(p, g);
      std::vector<Adam> adam{Adam(p.w1.size()), Adam(p.b1.size()), Adam(p.w2.size()), Adam(p.b2.size())};
      MlpPredictor best = p;
      Eval best_eval = evaluate(p, val);
      int t = 0, since_best = 0;
      for (int epoch = 1; epoch <= o.max_epochs && !stop(); ++epoch) {
        const double loss = trainEpoch(p, train, o, g, adam, t);
        const Eval e = evaluate(p, val);
        if (e.loss < best_eval.loss) {
          best = p;
          best_eval = e;
          since_best = 0;
        } else if (++since_best >= o.patience) {
          break;
        }
        if (on_progress) {
          std::lock_guard lock(mu);
          on_progress(
              {layer, epoch, o.max_epochs, loss, e.loss, e.accuracy, false, layers_done, int(pairs.size())});
        }
      }
      if (stop()) break;
      std::lock_guard lock(mu);
      trained[i] = std::move(best);
      accuracy[i] = best_eval.accuracy;
      finished[i] = 1;
      ++layers_done;
      if (on_progress)
        on_progress({layer, 0, o.max_epochs, 0, best_eval.loss, best_eval.accuracy, true, layers_done,
                     int(pairs.size())});
    }
  };
  const int n_threads =
      std::clamp(o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency()), 1, int(pairs.size()));
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mu;
  for (int i = 0; i < n_threads; ++i)
    threads.emplace_back([&] {
      try {
        worker();
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
        next = pairs.size();  // the others stop after their current layer
      }
    });
  for (auto& th : threads) th.join();
  if (error) std::rethrow_exception(error);
  for (size_t i = 0; i < pairs.size(); ++i)
    if (finished[i]) {
      set.layers.push_back(std::move(trained[i]));
      set.val_accuracy.push_back(accuracy[i]);
    }
  result.cancelled = stop() || set.layers.size() < pairs.size();
  return result;
}

}  // namespace moe
