// Device tensors without a GPU to run them: the executor's routing of device
// responses, the refusal at enqueue (a build without CUDA, or no device), and
// HVD_GPU_OPERATIONS. Runs in every build and needs no GPU.
#include <gtest/gtest.h>

#include "runtime/common/options.h"
#include "runtime/data/device_ops.h"
#include "runtime/data/executor.h"
#include "tests/test_util.h"

namespace hvd {
namespace {

using std::chrono::milliseconds;

// Records the responses it is given and completes their Works.
class FakeDeviceOps : public DeviceOps {
 public:
  explicit FakeDeviceOps(std::vector<std::string>* seen) : seen_(seen) {}
  Status Execute(const Response& r, const std::vector<TensorEntry*>& entries) override {
    seen_->push_back(r.names[0]);
    for (TensorEntry* e : entries)
      if (e) e->work->Complete(Status::OK());
    return Status::OK();
  }

 private:
  std::vector<std::string>* seen_;
};

Response DeviceResponse(const std::string& name, int device) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.names = {name};
  r.counts = {4};
  r.device = device;
  return r;
}

TEST(DeviceOps, ExecutorRoutesDeviceResponsesToTheFactoryMadeOnFirstUse) {
  std::vector<std::string> seen;
  std::vector<int> created_for;
  Executor executor(nullptr);
  executor.SetDeviceOpsFactory([&](int device, std::unique_ptr<DeviceOps>* out) {
    created_for.push_back(device);
    *out = std::make_unique<FakeDeviceOps>(&seen);
    return Status::OK();
  });
  for (const char* name : {"a", "b"}) {
    TensorEntry e;
    e.name = name;
    e.device = 3;
    e.work = std::make_shared<Work>(name);
    std::vector<TensorEntry*> entries = {&e};
    EXPECT_TRUE(executor.Execute(DeviceResponse(name, 3), entries).ok());
    EXPECT_TRUE(e.work->Wait(milliseconds(0)).ok());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(created_for, std::vector<int>{3});  // once, for the entry's device
}

TEST(DeviceOps, ExecutorWithoutADeviceBackendFailsTheResponseWithTheReason) {
  Executor executor(nullptr);
  TensorEntry e;
  e.name = "w";
  e.device = 0;
  e.work = std::make_shared<Work>("w");
  Status s = executor.Execute(DeviceResponse("w", 0), {&e});
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << s.ToString();
  EXPECT_NE(s.message().find("'w' on cuda:0"), std::string::npos) << s.message();

  executor.SetDeviceOpsFactory([](int, std::unique_ptr<DeviceOps>*) {
    return Status::Timeout("NCCL init timed out");
  });
  s = executor.Execute(DeviceResponse("w", 0), {&e});
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("NCCL init timed out"), std::string::npos) << s.message();
}

TEST(DeviceOps, ErrorResponsesOnADeviceStayWithTheHostExecutor) {
  Executor executor(nullptr);  // no device backend: an error response must not need one
  Response r = DeviceResponse("bad", 0);
  r.type = ResponseType::kError;
  r.error_code = StatusCode::kMismatch;
  r.error_message = "dtype differs";
  TensorEntry e;
  e.name = "bad";
  e.work = std::make_shared<Work>("bad");
  EXPECT_TRUE(executor.Execute(r, {&e}).ok());
  EXPECT_EQ(e.work->Wait(milliseconds(0)).code(), StatusCode::kMismatch);
}

TEST(DeviceOps, WithoutCudaCreatingTheBackendIsInvalidUsage) {
  if (CudaBuilt()) GTEST_SKIP() << "this build has CUDA";
  DeviceOpsOptions o;
  std::unique_ptr<DeviceOps> ops;
  Status s = CreateDeviceOps(o, &ops);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(s.message(), "this libhvd was built without CUDA (HVD_WITH_CUDA)");
}

// Whether CUDA is missing from the build, no device is present, or the buffer is
// host memory: the enqueue fails at once, naming the tensor, and host work goes on.
TEST(DeviceOps, DeviceTensorWithHostMemoryIsRefusedAndHostWorkGoesOn) {
  testing::RunRanks(1, [&](int, Runtime& rt) {
    std::vector<float> buf(4, 1.0f);
    TensorEntry a;
    a.name = "dev";
    a.input = buf.data();
    a.output = buf.data();
    a.shape = {4};
    a.device = 0;
    std::shared_ptr<Work> work;
    Status s = rt.EnqueueOne(TensorEntry(a), 0, &work);
    EXPECT_TRUE(s.code() == StatusCode::kInvalidUsage || s.code() == StatusCode::kInvalidArgument)
        << s.ToString();
    EXPECT_NE(s.message().find("'dev'"), std::string::npos) << s.message();
    if (!CudaBuilt()) {
      EXPECT_NE(s.message().find("built without CUDA"), std::string::npos) << s.message();
    }

    a.device = -2;
    s = rt.EnqueueOne(TensorEntry(a), 0, &work);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();

    std::vector<float> out(4);
    s = testing::AllreduceSync(rt, "host", buf.data(), out.data(), 4, DataType::kFloat32,
                               ReduceOp::kSum);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(out, std::vector<float>(4, 1.0f));
  });
}

TEST(DeviceOps, GpuOperationsOption) {
  auto env = [](const char* value) {
    return [value](const char* name) -> const char* {
      return std::string(name) == "HVD_GPU_OPERATIONS" ? value : nullptr;
    };
  };
  RuntimeOptions o;
  ASSERT_TRUE(RuntimeOptions::FromEnv(&o, [](const char*) -> const char* { return nullptr; }).ok());
  EXPECT_EQ(o.gpu_operations, "nccl");
  ASSERT_TRUE(RuntimeOptions::FromEnv(&o, env("GLOO")).ok());
  EXPECT_EQ(o.gpu_operations, "gloo");
  Status s = RuntimeOptions::FromEnv(&o, env("mpi"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("HVD_GPU_OPERATIONS='mpi'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hvd
