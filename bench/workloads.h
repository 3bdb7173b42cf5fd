// Workloads: the tensor sets every all-reduce benchmark times, and the values that
// let each rank check its result.
//
// A workload is an ordered list of float32 tensors, already in the order a
// data-parallel trainer hands them to the runtime (DDP order: the reverse of the
// model's parameter order, because backward produces the last layer's gradients
// first). The three families:
//   - "sizes": one buffer each of 4 KiB, 64 KiB, 1 MiB, 16 MiB, 64 MiB, 256 MiB;
//   - "resnet50": ResNet-50's 161 parameter tensors (25.6 M floats, 102 MB), read
//     from a data file of `numel<TAB>name<TAB>shape` lines in model order;
//   - "small": 1000 tensors of 4 KiB (the negotiation-bound case).
//
// Values. Rank r fills element i of tensor t with (r + 1) * (1 + (i + 3t) mod 5),
// a small integer, so the float32 sum over n ranks is exact:
// (1 + (i + 3t) mod 5) * n(n + 1) / 2. Receive buffers are filled with a sentinel
// (NaN) before a checked run, so a peer that writes nothing fails the check too.
//
// No I/O besides reading the data file; no communication. Not thread-safe.
#ifndef HVD_BENCH_WORKLOADS_H_
#define HVD_BENCH_WORKLOADS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hvd {
namespace bench {

struct Tensor {
  std::string name;  // unique within the workload; the collective's name for dprun
  int64_t count = 0;  // float32 elements
};

struct Workload {
  std::string name;             // "4KiB", ..., "resnet50", "1000x4KiB"
  std::string family;           // "sizes", "resnet50" or "small"
  std::vector<Tensor> tensors;  // in the order they are enqueued (DDP order)

  int64_t total_count() const;
  int64_t total_bytes() const { return total_count() * 4; }
};

// Where the ResNet-50 data file is, in order of preference: `flag` if non-empty,
// else $HVD_BENCH_RESNET50_SIZES, else <repo>/../shared/data/resnet50_sizes.txt,
// else the copy committed at <repo>/bench/data/resnet50_sizes.txt. `repo` is the
// source directory compiled in by CMake.
std::string ResNet50SizesPath(const std::string& flag, const std::string& repo);

// The workloads of `selection` ("all", "sizes", "resnet50" or "small", or a comma
// list of these). Returns false and sets *error for an unknown selection or an
// unreadable or malformed data file (naming the file and line).
bool MakeWorkloads(const std::string& selection, const std::string& resnet50_path,
                   std::vector<Workload>* out, std::string* error);

// One tensor's floats, owned by a Buffers.
class FloatSpan {
 public:
  FloatSpan(float* data, size_t size) : data_(data), size_(size) {}
  float* data() const { return data_; }
  size_t size() const { return size_; }
  float& operator[](size_t i) const { return data_[i]; }
  float* begin() const { return data_; }
  float* end() const { return data_ + size_; }

 private:
  float* data_;
  size_t size_;
};

// How a workload's tensors lie in memory: each in an allocation of its own, as a
// framework's parameters and gradients usually are (the default), or as
// consecutive slices of one send and one receive buffer, as the gradients of a
// bucket are under DDP's gradient_as_bucket_view or a flat-parameter optimizer.
enum class Layout { kSeparate, kBucket };

// The send and receive buffers of one workload on one rank. Movable, not
// copyable (the spans point into `storage`).
struct Buffers {
  std::vector<FloatSpan> send;
  std::vector<FloatSpan> recv;
  std::vector<std::vector<float>> storage;
  Buffers() = default;
  Buffers(Buffers&&) = default;
  Buffers& operator=(Buffers&&) = default;
};

// Allocates the buffers in `layout` and fills `send` with rank `rank`'s values.
void FillBuffers(const Workload& w, int rank, Buffers* b, Layout layout = Layout::kSeparate);

// "separate" or "bucket"; false for anything else.
bool ParseLayout(const std::string& name, Layout* layout);

// Fills every receive buffer with the sentinel.
void PoisonReceive(Buffers* b);

// Checks every receive buffer holds the sum over `size` ranks. Returns "" when
// correct, else a message naming the tensor, the element, the expected value and
// the value found (the first mismatch only).
std::string CheckReceive(const Workload& w, const Buffers& b, int size);

// "4 KiB", "64 MiB", "1.2 GiB".
std::string FormatBytes(int64_t bytes);

}  // namespace bench
}  // namespace hvd

#endif  // HVD_BENCH_WORKLOADS_H_
