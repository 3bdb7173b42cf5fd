// GPU allreduce tests: every dtype and op, scale factors, fusion of many small
// tensors, ordering after the caller's stream and joined ranks, through NCCL (one
// rank) and through host staging (three ranks sharing device 0); and the error
// paths. Every test that needs a GPU skips itself without one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda/finalizer.h"
#include "runtime/cuda/nccl_comm.h"
#include "runtime/store/store.h"
#include "tests/gpu/gpu_test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;

// Per-rank test data; unsigned types get non-negative values.
std::vector<double> Data(int rank, int64_t count, uint32_t seed, DataType dtype) {
  std::vector<double> v = RankData(rank, count, seed);
  if (dtype == DataType::kUInt8)
    for (double& x : v) x = std::fabs(x);
  return v;
}

// The reference result over `size` ranks, in double.
std::vector<double> Expected(DataType dtype, ReduceOp op, int size, int64_t count, uint32_t seed,
                             double pre, double post, int contributors = -1) {
  if (contributors < 0) contributors = size;
  std::vector<std::vector<double>> data;
  for (int r = 0; r < contributors; ++r) data.push_back(Data(r, count, seed, dtype));
  std::vector<double> want(count);
  for (int64_t i = 0; i < count; ++i) {
    double acc = op == ReduceOp::kProduct ? 1 : op == ReduceOp::kMin ? INFINITY
                 : op == ReduceOp::kMax   ? -INFINITY
                                          : 0;
    for (int r = 0; r < contributors; ++r) {
      const double x = data[r][i] * pre;
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage: acc += x; break;
        case ReduceOp::kMin: acc = std::min(acc, x); break;
        case ReduceOp::kMax: acc = std::max(acc, x); break;
        case ReduceOp::kProduct: acc *= x; break;
        case ReduceOp::kAdasum: break;  // Host tensors only.
      }
    }
    // AVERAGE divides by the set's size: joined ranks contributed zeros.
    if (op == ReduceOp::kAverage) acc = IsFloat(dtype) ? acc / size : std::trunc(acc / size);
    want[i] = acc * post;
  }
  return want;
}

Status DeviceAllreduce(Runtime& rt, const std::string& name, const void* in, void* out, int64_t count,
                       DataType dtype, ReduceOp op, double pre = 1.0, double post = 1.0,
                       void* stream = nullptr) {
  TensorEntry a;
  a.name = name;
  a.input = in;
  a.output = out;
  a.shape = {count};
  a.dtype = dtype;
  a.reduce_op = op;
  a.prescale_factor = pre;
  a.postscale_factor = post;
  a.device = 0;
  a.stream = stream;
  std::shared_ptr<Work> work;
  HVD_RETURN_IF_ERROR(rt.EnqueueOne(TensorEntry(a), 0, &work));
  return work->Wait(milliseconds(60000));
}

class GpuAllreduce : public ::testing::TestWithParam<GpuMode> {};

TEST_P(GpuAllreduce, EveryDtypeAndOp) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  RunRanks(m.size, [&](int rank, Runtime& rt) {
    uint32_t seed = 1;
    for (DataType dtype : AllDataTypes()) {
      const size_t elem = DataTypeSize(dtype);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct}) {
        for (int64_t count : {int64_t{1}, int64_t{17}, int64_t{1000}}) {
          ++seed;
          const std::string name = std::string(DataTypeName(dtype)) + "." + ReduceOpName(op) + "." +
                                   std::to_string(count);
          DeviceMemory in(count * elem), out(count * elem);
          in.Upload(Encode(Data(rank, count, seed, dtype), dtype));
          Status s = DeviceAllreduce(rt, name, in.get(), out.get(), count, dtype, op);
          if (m.ops == "nccl" && dtype == DataType::kInt16) {  // NCCL has no int16
            EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
            EXPECT_NE(s.message().find("NCCL cannot reduce int16"), std::string::npos) << s.message();
            continue;
          }
          ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
          ExpectValues(dtype, out.Download(), Expected(dtype, op, m.size, count, seed, 1, 1), name);
        }
      }
    }
  }, WithGpuOps(GetParam().ops));
}

TEST_P(GpuAllreduce, ScaleFactorsAndInPlace) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  RunRanks(m.size, [&](int rank, Runtime& rt) {
    uint32_t seed = 100;
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                           DataType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        ++seed;
        const int64_t count = 333;
        const size_t bytes = count * DataTypeSize(dtype);
        const std::string name = std::string("scaled.") + DataTypeName(dtype) + "." + ReduceOpName(op);
        DeviceMemory in(bytes), out(bytes);
        in.Upload(Encode(Data(rank, count, seed, dtype), dtype));
        Status s = DeviceAllreduce(rt, name, in.get(), out.get(), count, dtype, op, 0.5, 4.0);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        ExpectValues(dtype, out.Download(), Expected(dtype, op, m.size, count, seed, 0.5, 4.0), name);
        // In place: input == output.
        s = DeviceAllreduce(rt, name + ".inplace", in.get(), in.get(), count, dtype, op, 0.5, 4.0);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        ExpectValues(dtype, in.Download(), Expected(dtype, op, m.size, count, seed, 0.5, 4.0),
                     name + ".inplace");
      }
    }
  }, WithGpuOps(GetParam().ops));
}

// 150 tensors in one group (one fused response, more than two batched-copy
// launches), then 40 independent async tensors the planner fuses as they come.
TEST_P(GpuAllreduce, FusesManySmallTensors) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  RunRanks(m.size, [&](int rank, Runtime& rt) {
    const DataType dtype = DataType::kFloat32;
    const int n = 150;
    std::vector<std::unique_ptr<DeviceMemory>> ins, outs;
    std::vector<TensorEntry> entries(n);
    for (int i = 0; i < n; ++i) {
      const int64_t count = 1 + (i * 37) % 300;
      ins.push_back(std::make_unique<DeviceMemory>(count * 4));
      outs.push_back(std::make_unique<DeviceMemory>(count * 4));
      ins.back()->Upload(Encode(Data(rank, count, 1000 + i, dtype), dtype));
      TensorEntry& e = entries[i];
      e.name = "group." + std::to_string(i);
      e.type = OpType::kAllreduce;
      e.dtype = dtype;
      e.reduce_op = ReduceOp::kAverage;
      e.input = ins.back()->get();
      e.output = outs.back()->get();
      e.shape = {count};
      e.prescale_factor = 0.5;
      e.postscale_factor = 2.0;
      e.device = 0;
      e.group_id = 7;
      e.group_size = n;
    }
    std::vector<std::shared_ptr<Work>> works;
    Status s = rt.Enqueue(std::move(entries), 0, &works);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int i = 0; i < n; ++i) {
      Status w = works[i]->Wait(milliseconds(60000));
      ASSERT_TRUE(w.ok()) << "group." << i << ": " << w.ToString();
      const int64_t count = 1 + (i * 37) % 300;
      ExpectValues(dtype, outs[i]->Download(),
                   Expected(dtype, ReduceOp::kAverage, m.size, count, 1000 + i, 0.5, 2.0),
                   "group." + std::to_string(i));
    }

    const DataType half = DataType::kFloat16;
    std::vector<std::unique_ptr<DeviceMemory>> hin, hout;
    std::vector<std::shared_ptr<Work>> async;
    for (int i = 0; i < 40; ++i) {
      const int64_t count = 1 + i * 3;
      hin.push_back(std::make_unique<DeviceMemory>(count * 2));
      hout.push_back(std::make_unique<DeviceMemory>(count * 2));
      hin.back()->Upload(Encode(Data(rank, count, 2000 + i, half), half));
      TensorEntry a;
      a.name = "async." + std::to_string(i);
      a.input = hin.back()->get();
      a.output = hout.back()->get();
      a.shape = {count};
      a.dtype = half;
      a.reduce_op = ReduceOp::kSum;
      a.device = 0;
      std::shared_ptr<Work> w;
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &w).ok());
      async.push_back(w);
    }
    for (int i = 0; i < 40; ++i) {
      Status w = async[i]->Wait(milliseconds(60000));
      ASSERT_TRUE(w.ok()) << w.ToString();
      ExpectValues(half, hout[i]->Download(),
                   Expected(half, ReduceOp::kSum, m.size, 1 + i * 3, 2000 + i, 1, 1),
                   "async." + std::to_string(i));
    }
  }, WithGpuOps(GetParam().ops));
}

void CUDART_CB SleepOnStream(void*) { std::this_thread::sleep_for(milliseconds(300)); }

// The caller's stream fills the input only after a 300 ms host callback; the
// allreduce, enqueued at once with that stream, must see the filled input.
TEST_P(GpuAllreduce, OrdersAfterTheCallersStream) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  RunRanks(m.size, [&](int rank, Runtime& rt) {
    const int64_t count = 1 << 16;
    DeviceMemory in(count * 4), out(count * 4);
    ASSERT_EQ(cudaMemset(in.get(), 0, count * 4), cudaSuccess);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(stream, SleepOnStream, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(in.get(), 1, count * 4, stream), cudaSuccess);  // 0x01010101 each
    Status s = DeviceAllreduce(rt, "ordered", in.get(), out.get(), count, DataType::kInt32,
                               ReduceOp::kSum, 1.0, 1.0, stream);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectValues(DataType::kInt32, out.Download(),
                 std::vector<double>(count, 16843009.0 * m.size), "ordered");
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
  }, WithGpuOps(GetParam().ops));
}

std::atomic<bool> g_hold{false};
void CUDART_CB HoldWhileFlagged(void*) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (g_hold.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
}

// Stream-ordered completion: with NCCL the Work counts as enqueued while the GPU
// is still held up behind the caller's stream, so the host does not wait; a
// consumer stream ordered after it sees the reduced values. (Host staging is
// synchronous: it is done, hence enqueued, by the time it is seen.)
TEST_P(GpuAllreduce, ConsumerStreamWaitsWhileTheHostDoesNot) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  if (m.ops != "nccl" || m.size != 1) GTEST_SKIP() << "NCCL at one rank only";
  RunRanks(1, [&](int, Runtime& rt) {
    const int64_t count = 1 << 16;
    DeviceMemory buf(count * 4), copy(count * 4);
    ASSERT_EQ(cudaMemset(buf.get(), 0, count * 4), cudaSuccess);
    cudaStream_t producer = nullptr, consumer = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
    g_hold = true;
    ASSERT_EQ(cudaLaunchHostFunc(producer, HoldWhileFlagged, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buf.get(), 1, count * 4, producer), cudaSuccess);
    TensorEntry a;
    a.name = "stream-ordered";
    a.input = buf.get();
    a.output = buf.get();
    a.shape = {count};
    a.dtype = DataType::kInt32;
    a.reduce_op = ReduceOp::kSum;
    a.device = 0;
    a.stream = producer;
    std::shared_ptr<Work> work;
    ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &work).ok());
    Status s = work->WaitEnqueued(milliseconds(10000));
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(work->Poll());  // the GPU is still held: the host did not wait for it
    ASSERT_TRUE(work->OrderAfter(consumer).ok());
    ASSERT_EQ(cudaMemcpyAsync(copy.get(), buf.get(), count * 4, cudaMemcpyDeviceToDevice, consumer),
              cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(consumer), cudaErrorNotReady);
    g_hold = false;
    ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
    ExpectValues(DataType::kInt32, copy.Download(), std::vector<double>(count, 16843009.0),
                 "stream-ordered");
    EXPECT_TRUE(work->Wait(milliseconds(10000)).ok());
    cudaStreamDestroy(producer);
    cudaStreamDestroy(consumer);
  }, WithGpuOps(GetParam().ops));
}

// The last rank joins at once; the others' device allreduces get its identity
// and AVERAGE divides by the set's size, the joined rank included.
TEST_P(GpuAllreduce, JoinedRankContributesIdentity) {
  HVD_SKIP_WITHOUT_GPU();
  const GpuMode m = GetParam();
  if (m.size < 2) GTEST_SKIP() << "join needs two ranks (NCCL runs one rank per GPU)";
  RunRanks(m.size, [&](int rank, Runtime& rt) {
    if (rank < m.size - 1) {
      const int64_t count = 500;
      for (ReduceOp op : {ReduceOp::kAverage, ReduceOp::kMin}) {
        DeviceMemory in(count * 4), out(count * 4);
        in.Upload(Encode(Data(rank, count, 77, DataType::kFloat32), DataType::kFloat32));
        const std::string name = std::string("joined.") + ReduceOpName(op);
        Status s = DeviceAllreduce(rt, name, in.get(), out.get(), count, DataType::kFloat32, op);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ExpectValues(DataType::kFloat32, out.Download(),
                     Expected(DataType::kFloat32, op, m.size, count, 77, 1, 1, m.size - 1), name);
      }
    }
    std::shared_ptr<Work> join;
    ASSERT_TRUE(rt.Join(0, &join).ok());
    EXPECT_TRUE(join->Wait(milliseconds(60000)).ok());
  }, WithGpuOps(GetParam().ops));
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuAllreduce, ::testing::ValuesIn(GpuModes()), ModeName);

// ---- Errors -------------------------------------------------------------------

TEST(GpuErrors, HostPointerIsRefusedAtEnqueue) {
  HVD_SKIP_WITHOUT_GPU();
  RunRanks(1, [&](int, Runtime& rt) {
    std::vector<float> host(16, 1.0f);
    TensorEntry a;
    a.name = "host_as_device";
    a.input = host.data();
    a.output = host.data();
    a.shape = {16};
    a.device = 0;
    std::shared_ptr<Work> work;
    Status s = rt.EnqueueOne(TensorEntry(a), 0, &work);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("host_as_device"), std::string::npos) << s.message();
  });
}

TEST(GpuErrors, UnknownDeviceIsRefusedAtEnqueue) {
  HVD_SKIP_WITHOUT_GPU();
  RunRanks(1, [&](int, Runtime& rt) {
    DeviceMemory buf(64);
    TensorEntry a;
    a.name = "nowhere";
    a.input = buf.get();
    a.output = buf.get();
    a.shape = {16};
    a.device = GpuCount();
    std::shared_ptr<Work> work;
    Status s = rt.EnqueueOne(TensorEntry(a), 0, &work);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  });
}

TEST(GpuErrors, HostAndDeviceTensorsAcrossRanksAreAMismatch) {
  HVD_SKIP_WITHOUT_GPU();
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> host(8, 1.0f);
    DeviceMemory dev(32);
    TensorEntry a;
    a.name = "where";
    a.shape = {8};
    a.input = rank == 0 ? static_cast<void*>(host.data()) : dev.get();
    a.output = const_cast<void*>(a.input);
    a.device = rank == 0 ? -1 : 0;
    std::shared_ptr<Work> work;
    ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &work).ok());
    Status s = work->Wait(milliseconds(30000));
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_NE(s.message().find("device"), std::string::npos) << s.message();
  }, WithGpuOps("gloo"));
}

// NCCL refuses two ranks on one GPU. Whatever this NCCL does, the job must not
// hang: the allreduce completes, and a failure carries NCCL's text.
TEST(GpuErrors, NcclRanksSharingAGpuFailCleanly) {
  HVD_SKIP_WITHOUT_GPU();
  auto store = NewInMemoryStore();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      RuntimeOptions o = TestOptions(r, 2);
      o.timeout = milliseconds(10000);
      o.gpu_operations = "nccl";
      std::unique_ptr<Runtime> rt;
      ASSERT_TRUE(Runtime::Create(o, store, &rt).ok());
      DeviceMemory buf(4096);
      TensorEntry a;
      a.name = "shared_gpu";
      a.input = buf.get();
      a.output = buf.get();
      a.shape = {1024};
      a.device = 0;
      std::shared_ptr<Work> work;
      Status s = rt->EnqueueOne(TensorEntry(a), 0, &work);
      if (s.ok()) s = work->Wait(milliseconds(60000));
      EXPECT_NE(s.code(), StatusCode::kInProgress) << "rank " << r << " hung: " << s.ToString();
      if (!s.ok()) {
        EXPECT_NE(s.message().find("NCCL"), std::string::npos) << s.message();
      }
      rt->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
}

// Rank 1 never joins: creating the communicator gives up after the timeout and
// aborts, instead of blocking in ncclCommInitRank forever.
TEST(GpuErrors, NcclInitTimesOutWhenAPeerNeverJoins) {
  HVD_SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto store = NewInMemoryStore();
  std::unique_ptr<cuda::NcclComm> comm;
  const auto start = std::chrono::steady_clock::now();
  Status s = cuda::NcclComm::Create(store.get(), 0, 2, milliseconds(2000), &comm);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("HVD_TIMEOUT"), std::string::npos) << s.message();
  EXPECT_LT(took, std::chrono::seconds(15));
}

std::atomic<bool> g_release{false};
void CUDART_CB BlockUntilReleased(void*) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!g_release.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
}

// GPU work that never finishes within the timeout: the finalizer aborts the
// communicator and fails the Work with kTimeout, without waiting for the GPU.
TEST(GpuErrors, FinalizerTimesOutAndAborts) {
  HVD_SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  g_release = false;
  ASSERT_EQ(cudaLaunchHostFunc(stream, BlockUntilReleased, nullptr), cudaSuccess);
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, stream), cudaSuccess);
  std::atomic<bool> aborted{false};
  auto work = std::make_shared<Work>("stuck");
  {
    std::unique_ptr<cuda::Finalizer> owned;
    ASSERT_TRUE(cuda::Finalizer::Create(0, milliseconds(500), [] { return Status::OK(); },
                                        [&](const Status&) { aborted = true; }, &owned)
                    .ok());
    cuda::Finalizer& finalizer = *owned;
    finalizer.Push(done, "NCCL allreduce of 'stuck'", [work](const Status& s) { work->Complete(s); });
    Status s = work->Wait(milliseconds(5000));
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    EXPECT_NE(s.message().find("'stuck'"), std::string::npos) << s.message();
    EXPECT_TRUE(aborted.load());
    EXPECT_EQ(finalizer.status().code(), StatusCode::kTimeout);
    // Later work fails at once with the sticky failure.
    cudaEvent_t later = nullptr;
    ASSERT_EQ(cudaEventCreateWithFlags(&later, cudaEventDisableTiming), cudaSuccess);
    auto second = std::make_shared<Work>("later");
    finalizer.Push(later, "later", [second](const Status& st) { second->Complete(st); });
    EXPECT_EQ(second->Wait(milliseconds(0)).code(), StatusCode::kTimeout);
    cudaEventDestroy(later);
  }
  g_release = true;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaEventDestroy(done);  // the finalizer only reads the events it is given
  cudaStreamDestroy(stream);
}

// The error texts need libnccl and libcudart but no device.
TEST(GpuErrors, NcclAndCudaErrorsCarryTheirText) {
  Status s = cuda::NcclStatus(ncclInvalidUsage, nullptr, "ncclAllReduce");
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(s.message().rfind("ncclAllReduce: NCCL error: ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(ncclGetErrorString(ncclInvalidUsage)), std::string::npos) << s.message();
  EXPECT_EQ(cuda::NcclStatus(ncclRemoteError, nullptr, "x").code(), StatusCode::kRemoteError);
  EXPECT_EQ(cuda::NcclStatus(ncclSystemError, nullptr, "x").code(), StatusCode::kRemoteError);
  EXPECT_EQ(cuda::NcclStatus(ncclInternalError, nullptr, "x").code(), StatusCode::kInternal);
  EXPECT_TRUE(cuda::NcclStatus(ncclSuccess, nullptr, "x").ok());
  Status c = cuda::CudaStatus(cudaErrorNoDevice, "cudaSetDevice");
  EXPECT_EQ(c.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(c.message().find("cudaErrorNoDevice"), std::string::npos) << c.message();
  EXPECT_EQ(cuda::SecondsText(milliseconds(30000)), "30 s");
  EXPECT_EQ(cuda::SecondsText(milliseconds(2500)), "2.5 s");
}

}  // namespace
}  // namespace testing
}  // namespace hvd
