// Dims: a tensor's shape, held inline up to kInline dimensions.
//
// Every enqueued entry carries its shape, and a step enqueues one per gradient: a
// std::vector would cost an allocation on each enqueue and a free when its queue
// node is reused. Shapes of more than kInline dimensions go to the heap. Reads like a std::vector<int64_t>
// (iteration, size, indexing, assign from a range) and converts to and from one.
#ifndef HVD_RUNTIME_COMMON_DIMS_H_
#define HVD_RUNTIME_COMMON_DIMS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace hvd {

class Dims {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  static constexpr size_t kInline = 6;

  Dims() = default;
  Dims(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  Dims(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }  // NOLINT
  Dims& operator=(std::initializer_list<int64_t> dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }
  Dims& operator=(const std::vector<int64_t>& dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }

  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    int64_t* out = Reserve(n);
    for (size_t i = 0; i < n; ++i, ++first) out[i] = static_cast<int64_t>(*first);
    size_ = n;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
  int64_t* data() { return size_ <= kInline ? inline_ : heap_.data(); }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }

  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT

  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

 private:
  // Room for n dimensions (the inline array, or the heap's), contents unspecified.
  // heap_ holds elements only while it is in use, so a copy of an inline Dims
  // copies no heap.
  int64_t* Reserve(size_t n) {
    if (n <= kInline) {
      heap_.clear();
      return inline_;
    }
    heap_.resize(n);
    return heap_.data();
  }

  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;  // used when size_ > kInline
  size_t size_ = 0;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_DIMS_H_
