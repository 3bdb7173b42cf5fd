#include "runtime/transport/hierarchy_choice.h"

#include <algorithm>

namespace hvd {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int HierarchyChoice::SizeClass(int64_t bytes) {
  int c = 0;
  while (bytes >= 4) {
    bytes /= 4;
    ++c;
  }
  return c;
}

HierarchyChoice::Path HierarchyChoice::Next(int64_t bytes) const {
  if (mode_ == Mode::kHierarchical) return Path::kHierarchical;
  if (mode_ == Mode::kFlat) return Path::kFlat;
  auto it = classes_.find(SizeClass(bytes));
  if (it == classes_.end()) return Path::kHierarchical;
  const Class& c = it->second;
  if (c.settled) return c.chosen;
  return c.hierarchical.size() <= c.flat.size() ? Path::kHierarchical : Path::kFlat;
}

bool HierarchyChoice::Record(int64_t bytes, Path path, double seconds, double local[2]) {
  if (mode_ != Mode::kAuto) return false;
  Class& c = classes_[SizeClass(bytes)];
  if (c.settled) return false;
  (path == Path::kHierarchical ? c.hierarchical : c.flat).push_back(seconds);
  if (static_cast<int>(c.hierarchical.size()) < kSamples ||
      static_cast<int>(c.flat.size()) < kSamples)
    return false;
  local[0] = Median(c.hierarchical);
  local[1] = Median(c.flat);
  return true;
}

HierarchyChoice::Path HierarchyChoice::Decide(int64_t bytes, const double summed[2]) {
  Class& c = classes_[SizeClass(bytes)];
  c.settled = true;
  c.chosen = summed[1] < summed[0] * (1 - kFlatMargin) ? Path::kFlat : Path::kHierarchical;
  c.hierarchical.clear();
  c.flat.clear();
  return c.chosen;
}

bool HierarchyChoice::Settled(int64_t bytes, Path* path) const {
  if (mode_ != Mode::kAuto) {
    *path = Next(bytes);
    return true;
  }
  auto it = classes_.find(SizeClass(bytes));
  if (it == classes_.end() || !it->second.settled) return false;
  *path = it->second.chosen;
  return true;
}

}  // namespace hvd
