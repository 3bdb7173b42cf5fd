// A data-parallel training job over the C API: a two-layer MLP learns a synthetic
// binary classification task. Every rank builds the same data set, trains on its
// own slice of each batch, and averages its gradients with the other ranks through
// hvd_allreduce_async (one named tensor per parameter, fused by the runtime). At the
// end every rank checks that all ranks hold identical weights.
//
//   dprun -np 4 build/examples/train_mlp [--epochs N]
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hvd.h"

namespace {

constexpr int kFeatures = 16;
constexpr int kHidden = 32;
constexpr int kSamples = 8192;
constexpr int kGlobalBatch = 256;

#define CHECK_HVD(call)                                                                     \
  do {                                                                                      \
    hvd_status_t _s = (call);                                                               \
    if (_s != HVD_SUCCESS) {                                                                \
      std::fprintf(stderr, "%s failed: %s: %s\n", #call, hvd_status_string(_s), hvd_last_error()); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Params {
  std::vector<float> w1 = std::vector<float>(kHidden * kFeatures);
  std::vector<float> b1 = std::vector<float>(kHidden);
  std::vector<float> w2 = std::vector<float>(kHidden);
  std::vector<float> b2 = std::vector<float>(1);
  std::vector<std::vector<float>*> All() { return {&w1, &b1, &w2, &b2}; }
};

struct Dataset {
  std::vector<float> x;  // kSamples x kFeatures
  std::vector<float> y;  // kSamples, 0 or 1
};

// The same data on every rank: labels from a fixed nonlinear rule plus noise.
Dataset MakeDataset() {
  Dataset d;
  d.x.resize(kSamples * kFeatures);
  d.y.resize(kSamples);
  std::mt19937 gen(1234);
  std::normal_distribution<float> normal(0, 1);
  for (int i = 0; i < kSamples; ++i) {
    float score = 0;
    for (int j = 0; j < kFeatures; ++j) {
      float v = normal(gen);
      d.x[i * kFeatures + j] = v;
      score += (j % 3 == 0 ? 1.0f : -0.5f) * v + 0.3f * v * v * (j % 2 ? 1 : -1);
    }
    d.y[i] = (score + 0.3f * normal(gen)) > 0 ? 1.0f : 0.0f;
  }
  return d;
}

// Forward and backward over samples [begin, end); adds the gradient of the mean
// loss (mean over `denominator` samples) into `grad`; returns the summed loss.
double ForwardBackward(const Params& p, const Dataset& d, int begin, int end, int denominator,
                       Params* grad) {
  double loss = 0;
  std::vector<float> h(kHidden);
  for (int i = begin; i < end; ++i) {
    const float* x = &d.x[i * kFeatures];
    float z = p.b2[0];
    for (int k = 0; k < kHidden; ++k) {
      float a = p.b1[k];
      for (int j = 0; j < kFeatures; ++j) a += p.w1[k * kFeatures + j] * x[j];
      h[k] = std::tanh(a);
      z += p.w2[k] * h[k];
    }
    const float prob = 1.0f / (1.0f + std::exp(-z));
    const float y = d.y[i];
    loss += -(y * std::log(prob + 1e-7f) + (1 - y) * std::log(1 - prob + 1e-7f));
    const float dz = (prob - y) / denominator;
    grad->b2[0] += dz;
    for (int k = 0; k < kHidden; ++k) {
      grad->w2[k] += dz * h[k];
      const float da = dz * p.w2[k] * (1 - h[k] * h[k]);
      grad->b1[k] += da;
      for (int j = 0; j < kFeatures; ++j) grad->w1[k * kFeatures + j] += da * x[j];
    }
  }
  return loss;
}

double Accuracy(const Params& p, const Dataset& d) {
  int correct = 0;
  for (int i = 0; i < kSamples; ++i) {
    const float* x = &d.x[i * kFeatures];
    float z = p.b2[0];
    for (int k = 0; k < kHidden; ++k) {
      float a = p.b1[k];
      for (int j = 0; j < kFeatures; ++j) a += p.w1[k * kFeatures + j] * x[j];
      z += p.w2[k] * std::tanh(a);
    }
    correct += ((z > 0) == (d.y[i] > 0.5f));
  }
  return static_cast<double>(correct) / kSamples;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 8;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) epochs = std::atoi(argv[++i]);
  }
  CHECK_HVD(hvd_init());
  int rank = 0, size = 1;
  CHECK_HVD(hvd_rank(&rank));
  CHECK_HVD(hvd_size(&size));

  const Dataset data = MakeDataset();
  Params params;
  std::mt19937 gen(42);  // The same initial weights on every rank.
  std::normal_distribution<float> init(0, 0.3f);
  for (auto* t : params.All())
    for (auto& v : *t) v = init(gen);

  const int local_batch = kGlobalBatch / size;
  const int steps_per_epoch = kSamples / kGlobalBatch;
  const float lr = 0.5f;
  const char* names[] = {"grad.w1", "grad.b1", "grad.w2", "grad.b2"};
  if (rank == 0)
    std::printf("training a %d-%d-1 MLP on %d samples, %d ranks, global batch %d (%d per rank)\n",
                kFeatures, kHidden, kSamples, size, kGlobalBatch, local_batch);

  double first_loss = -1, last_loss = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double epoch_loss = 0;
    for (int step = 0; step < steps_per_epoch; ++step) {
      Params grad;
      for (auto* t : grad.All()) std::fill(t->begin(), t->end(), 0.0f);
      const int begin = step * kGlobalBatch + rank * local_batch;
      const double loss = ForwardBackward(params, data, begin, begin + local_batch, local_batch, &grad);
      // Average the gradients: one async all-reduce per parameter, fused by the runtime.
      auto grads = grad.All();
      hvd_handle_t* handles[4];
      for (int k = 0; k < 4; ++k)
        CHECK_HVD(hvd_allreduce_async(names[k], grads[k]->data(), grads[k]->data(),
                                      static_cast<int64_t>(grads[k]->size()), HVD_FLOAT32,
                                      HVD_AVERAGE, &handles[k]));
      double batch_loss[1] = {loss / local_batch};
      CHECK_HVD(hvd_allreduce("loss", batch_loss, batch_loss, 1, HVD_FLOAT64, HVD_AVERAGE));
      for (int k = 0; k < 4; ++k) {
        CHECK_HVD(hvd_wait(handles[k], -1));
        hvd_handle_release(handles[k]);
      }
      auto ps = params.All();
      for (int k = 0; k < 4; ++k)
        for (size_t i = 0; i < ps[k]->size(); ++i) (*ps[k])[i] -= lr * (*grads[k])[i];
      epoch_loss += batch_loss[0];
    }
    epoch_loss /= steps_per_epoch;
    if (first_loss < 0) first_loss = epoch_loss;
    last_loss = epoch_loss;
    if (rank == 0) std::printf("epoch %2d  loss %.4f\n", epoch + 1, epoch_loss);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Identical weights everywhere: the element-wise max and min across ranks agree.
  bool identical = true;
  int k = 0;
  for (auto* t : params.All()) {
    std::vector<float> mx(t->size()), mn(t->size());
    const std::string base = "check." + std::to_string(k++);
    CHECK_HVD(hvd_allreduce((base + ".max").c_str(), t->data(), mx.data(), t->size(), HVD_FLOAT32, HVD_MAX));
    CHECK_HVD(hvd_allreduce((base + ".min").c_str(), t->data(), mn.data(), t->size(), HVD_FLOAT32, HVD_MIN));
    identical = identical && std::memcmp(mx.data(), mn.data(), mx.size() * sizeof(float)) == 0 &&
                std::memcmp(mx.data(), t->data(), mx.size() * sizeof(float)) == 0;
  }
  const double acc = Accuracy(params, data);
  if (rank == 0) {
    std::printf("loss %.4f -> %.4f, accuracy %.1f%%, %.2f ms/step\n", first_loss, last_loss,
                100 * acc, 1000 * seconds / (epochs * steps_per_epoch));
  }
  std::printf("rank %d: weights %s across all %d ranks\n", rank,
              identical ? "identical" : "DIFFER", size);
  const hvd_status_t shut = hvd_shutdown();
  if (shut != HVD_SUCCESS) {
    std::fprintf(stderr, "hvd_shutdown: %s: %s\n", hvd_status_string(shut), hvd_last_error());
    return 1;
  }
  return identical && last_loss < first_loss ? 0 : 1;
}
