#include "bench/workloads.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

namespace hvd {
namespace bench {
namespace {

bool Readable(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

// Parses `numel<TAB>name<TAB>shape` lines; '#' starts a comment line.
bool ReadResNet50(const std::string& path, std::vector<Tensor>* model_order, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot read the ResNet-50 sizes file '" + path + "'";
    return false;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string numel, name;
    if (!std::getline(in, numel, '\t') || !std::getline(in, name, '\t') || name.empty()) {
      *error = path + ":" + std::to_string(lineno) + ": expected numel<TAB>name<TAB>shape";
      return false;
    }
    char* end = nullptr;
    const long long n = std::strtoll(numel.c_str(), &end, 10);
    if (end == numel.c_str() || *end != '\0' || n <= 0) {
      *error = path + ":" + std::to_string(lineno) + ": bad element count '" + numel + "'";
      return false;
    }
    model_order->push_back({"resnet50/" + name, n});
  }
  if (model_order->empty()) {
    *error = "the ResNet-50 sizes file '" + path + "' lists no tensors";
    return false;
  }
  return true;
}

Workload OneBuffer(int64_t bytes) {
  Workload w;
  w.name = FormatBytes(bytes);
  w.name.erase(w.name.find(' '), 1);  // "4KiB": no spaces in CSV keys
  w.family = "sizes";
  w.tensors.push_back({"size/" + w.name, bytes / 4});
  return w;
}

// (1 + (i + 3t) mod 5): the per-element factor of the values every rank sends.
inline float Factor(int64_t t, int64_t i) { return static_cast<float>(1 + (i + 3 * t) % 5); }

}  // namespace

int64_t Workload::total_count() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.count;
  return n;
}

std::string ResNet50SizesPath(const std::string& flag, const std::string& repo) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("HVD_BENCH_RESNET50_SIZES"); env && *env) return env;
  const std::string shared = repo + "/../shared/data/resnet50_sizes.txt";
  if (Readable(shared)) return shared;
  return repo + "/bench/data/resnet50_sizes.txt";
}

bool MakeWorkloads(const std::string& selection, const std::string& resnet50_path,
                   std::vector<Workload>* out, std::string* error) {
  bool sizes = false, resnet = false, small = false;
  std::istringstream in(selection);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "all") {
      sizes = resnet = small = true;
    } else if (item == "sizes") {
      sizes = true;
    } else if (item == "resnet50") {
      resnet = true;
    } else if (item == "small") {
      small = true;
    } else {
      *error = "unknown workload '" + item + "' (expected all, sizes, resnet50 or small)";
      return false;
    }
  }
  if (sizes) {
    for (int64_t kib : {4, 64, 1024, 16 << 10, 64 << 10, 256 << 10}) out->push_back(OneBuffer(kib << 10));
  }
  if (resnet) {
    std::vector<Tensor> model;
    if (!ReadResNet50(resnet50_path, &model, error)) return false;
    Workload w;
    w.name = "resnet50";
    w.family = "resnet50";
    w.tensors.assign(model.rbegin(), model.rend());  // DDP order
    out->push_back(std::move(w));
  }
  if (small) {
    Workload w;
    w.name = "1000x4KiB";
    w.family = "small";
    for (int i = 0; i < 1000; ++i) w.tensors.push_back({"small/" + std::to_string(i), 1024});
    out->push_back(std::move(w));
  }
  return true;
}

void FillBuffers(const Workload& w, int rank, Buffers* b, Layout layout) {
  const size_t n = w.tensors.size();
  const bool bucket = layout == Layout::kBucket;
  b->send.clear();
  b->recv.clear();
  b->storage.assign(bucket ? 2 : 2 * n, {});
  if (bucket) {
    b->storage[0].resize(w.total_count());
    b->storage[1].resize(w.total_count());
  }
  int64_t offset = 0;
  for (size_t t = 0; t < n; ++t) {
    const int64_t count = w.tensors[t].count;
    if (bucket) {
      b->send.emplace_back(b->storage[0].data() + offset, count);
      b->recv.emplace_back(b->storage[1].data() + offset, count);
      offset += count;
    } else {
      b->storage[2 * t].resize(count);
      b->storage[2 * t + 1].resize(count);
      b->send.emplace_back(b->storage[2 * t].data(), count);
      b->recv.emplace_back(b->storage[2 * t + 1].data(), count);
    }
    for (int64_t i = 0; i < count; ++i) b->send[t][i] = static_cast<float>(rank + 1) * Factor(t, i);
  }
}

bool ParseLayout(const std::string& name, Layout* layout) {
  if (name != "separate" && name != "bucket") return false;
  *layout = name == "bucket" ? Layout::kBucket : Layout::kSeparate;
  return true;
}

void PoisonReceive(Buffers* b) {
  for (auto& r : b->recv) std::fill(r.begin(), r.end(), std::numeric_limits<float>::quiet_NaN());
}

std::string CheckReceive(const Workload& w, const Buffers& b, int size) {
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  for (size_t t = 0; t < w.tensors.size(); ++t) {
    const auto& r = b.recv[t];
    for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
      const float want = Factor(t, i) * ranks_sum;
      if (!(r[i] == want)) {
        char msg[512];
        std::snprintf(msg, sizeof msg, "tensor '%s' element %lld: expected %g, got %g",
                      w.tensors[t].name.c_str(), static_cast<long long>(i), want, r[i]);
        return msg;
      }
    }
  }
  return "";
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

}  // namespace bench
}  // namespace hvd
