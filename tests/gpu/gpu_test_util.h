// Helpers for the GPU tests: device detection (every test skips itself without a
// device), device buffers, and the two device engines as test parameters.
#ifndef HVD_TESTS_GPU_GPU_TEST_UTIL_H_
#define HVD_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "controller/loop/runtime.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {

// The number of usable CUDA devices; 0 when CUDA cannot start (no driver, no GPU).
inline int GpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

#define HVD_SKIP_WITHOUT_GPU()                                          \
  do {                                                                  \
    if (::hvd::testing::GpuCount() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// A cudaMalloc'ed buffer on `device` (made current on the calling thread).
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes, int device = 0) : bytes_(bytes) {
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&data_, bytes ? bytes : 1), cudaSuccess) << bytes << " bytes";
  }
  ~DeviceMemory() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

  void Upload(const std::vector<uint8_t>& host) {
    ASSERT_LE(host.size(), bytes_);
    if (!host.empty()) {
      ASSERT_EQ(cudaMemcpy(data_, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  std::vector<uint8_t> Download() const { return Download(data_, bytes_); }

  static std::vector<uint8_t> Download(const void* p, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    if (bytes > 0) {
      EXPECT_NE(p, nullptr);
      EXPECT_EQ(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// A device engine and how many ranks (threads, all on device 0) it runs with.
struct GpuMode {
  std::string ops;  // HVD_GPU_OPERATIONS
  int size;
};

inline void PrintTo(const GpuMode& m, std::ostream* os) { *os << m.ops << " at " << m.size << " rank(s)"; }

inline std::string ModeName(const ::testing::TestParamInfo<GpuMode>& info) {
  return info.param.ops + "_" + std::to_string(info.param.size) + "ranks";
}

// NCCL at one rank (NCCL refuses two ranks on one GPU) and host staging at three
// ranks sharing device 0.
inline std::vector<GpuMode> GpuModes() { return {{"nccl", 1}, {"gloo", 3}}; }

inline std::function<void(RuntimeOptions&)> WithGpuOps(const std::string& ops) {
  return [ops](RuntimeOptions& o) { o.gpu_operations = ops; };
}

// Expects `got` (bytes of `dtype`) to equal `want` within the dtype's precision.
inline void ExpectValues(DataType dtype, const std::vector<uint8_t>& got,
                         const std::vector<double>& want, const std::string& what) {
  const std::vector<double> g = Decode(got, dtype);
  ASSERT_EQ(g.size(), want.size()) << what;
  const double tol = dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ? 1e-2
                     : dtype == DataType::kFloat32                               ? 1e-5
                     : dtype == DataType::kFloat64                               ? 1e-12
                                                                                 : 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::fabs(g[i] - want[i]) > tol * std::max(1.0, std::fabs(want[i]))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << want[i];
      return;
    }
  }
}

inline bool IsFloat(DataType d) {
  return d == DataType::kFloat32 || d == DataType::kFloat64 || d == DataType::kFloat16 ||
         d == DataType::kBFloat16;
}

inline std::vector<DataType> AllDataTypes() {
  return {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
          DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64,
          DataType::kInt16};
}

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_GPU_GPU_TEST_UTIL_H_
