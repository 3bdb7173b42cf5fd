// gpu_bandwidth: allreduce bandwidth of device tensors through the runtime.
//
// Two sweeps of float32 sum allreduces, each size timed end to end (enqueue to
// completed Work, one at a time, out of place):
//   - NCCL at one rank, 1 MB to --max-mb.
//   - Host staging (HVD_GPU_OPERATIONS=gloo) with 2 and 4 ranks as threads sharing
//     device 0, 1 MB to --staging-max-mb.
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, as nccl-tests reports it (0
// at one rank, where an allreduce moves nothing between ranks: algbw is then the
// cost of the runtime path and NCCL's local copy).
// Prints a Markdown table to stdout and, with --out FILE, writes it there too.
// Exits 2 without a GPU, 1 if an allreduce failed.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/loop/runtime.h"
#include "runtime/store/store.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string mode;
  int ranks;
  int64_t bytes;
  int iters;
  double seconds;  // mean per allreduce
};

int Iterations(int64_t bytes, int64_t budget_bytes, int lo, int hi) {
  return static_cast<int>(std::clamp<int64_t>(budget_bytes / std::max<int64_t>(bytes, 1), lo, hi));
}

// Runs the sweep with `ranks` runtimes on threads; rank 0's timings become rows.
bool Sweep(const std::string& mode, int ranks, const std::vector<int64_t>& sizes,
           int64_t budget_bytes, std::vector<Row>* rows) {
  auto store = NewInMemoryStore();
  std::mutex mu;
  bool ok = true;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& what, const Status& s) {
        std::lock_guard<std::mutex> lock(mu);
        std::fprintf(stderr, "%s, %d ranks, rank %d: %s: %s\n", mode.c_str(), ranks, r, what.c_str(),
                     s.ToString().c_str());
        ok = false;
      };
      RuntimeOptions o;
      o.rank = r;
      o.size = ranks;
      o.local_rank = r;
      o.local_size = ranks;
      o.gpu_operations = mode;
      o.cycle_time = std::chrono::microseconds(100);
      o.timeout = std::chrono::milliseconds(120000);
      std::unique_ptr<Runtime> rt;
      Status s = Runtime::Create(o, store, &rt);
      if (!s.ok()) return fail("Runtime::Create", s);
      cudaSetDevice(0);
      for (int64_t bytes : sizes) {
        void* in = nullptr;
        void* out = nullptr;
        if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) {
          fail("cudaMalloc of " + std::to_string(bytes) + " bytes", Status::Internal("out of memory"));
          break;
        }
        cudaMemset(in, 0, bytes);
        const int iters = Iterations(bytes, budget_bytes, 3, 50);
        double total = 0;
        for (int it = -1; it < iters; ++it) {  // iteration -1 warms up
          TensorEntry a;
          a.name = "bw." + std::to_string(bytes);
          a.input = in;
          a.output = out;
          a.shape = {bytes / 4};
          a.dtype = DataType::kFloat32;
          a.device = 0;
          std::shared_ptr<Work> work;
          const auto start = Clock::now();
          s = rt->EnqueueOne(TensorEntry(a), 0, &work);
          if (s.ok()) s = work->Wait(std::chrono::milliseconds(120000));
          const double took = std::chrono::duration<double>(Clock::now() - start).count();
          if (!s.ok()) {
            fail(a.name, s);
            break;
          }
          if (it >= 0) total += took;
        }
        cudaFree(in);
        cudaFree(out);
        if (!ok) break;
        if (r == 0) {
          std::lock_guard<std::mutex> lock(mu);
          rows->push_back({mode, ranks, bytes, iters, total / iters});
        }
      }
      rt->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  return ok;
}

std::string Table(const std::vector<Row>& rows) {
  std::string s =
      "| engine | ranks | size | iterations | time (ms) | algbw (GB/s) | busbw (GB/s) |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Row& r : rows) {
    const double algbw = r.bytes / r.seconds / 1e9;
    const double busbw = algbw * 2.0 * (r.ranks - 1) / r.ranks;
    char line[256];
    std::snprintf(line, sizeof(line), "| %s | %d | %lld MB | %d | %.3f | %.2f | %.2f |\n",
                  r.mode.c_str(), r.ranks, static_cast<long long>(r.bytes >> 20), r.iters,
                  r.seconds * 1e3, algbw, busbw);
    s += line;
  }
  return s;
}

std::vector<int64_t> Sizes(int64_t max_mb) {
  std::vector<int64_t> v;
  for (int64_t mb = 1; mb <= max_mb; mb *= 4) v.push_back(mb << 20);
  return v;
}

}  // namespace
}  // namespace hvd

int main(int argc, char** argv) {
  int64_t max_mb = 1024;
  int64_t staging_max_mb = 1024;
  const char* out_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-mb") && i + 1 < argc) {
      max_mb = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--staging-max-mb") && i + 1 < argc) {
      staging_max_mb = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
      out_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--max-mb N] [--staging-max-mb N] [--out FILE]\n", argv[0]);
      return 64;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_bandwidth: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::vector<hvd::Row> rows;
  bool ok = hvd::Sweep("nccl", 1, hvd::Sizes(max_mb), int64_t{8} << 30, &rows);
  // Staging moves every byte over loopback TCP: fewer iterations, and 4 ranks stop
  // at 256 MB to keep pinned memory and time in bounds.
  ok = hvd::Sweep("gloo", 2, hvd::Sizes(staging_max_mb), int64_t{1} << 30, &rows) && ok;
  ok = hvd::Sweep("gloo", 4, hvd::Sizes(std::min<int64_t>(staging_max_mb, 256)), int64_t{1} << 30,
                  &rows) && ok;
  const std::string report = std::string("Allreduce of float32 through the dprun runtime on ") +
                             prop.name + " (device 0), sum, out of place\n\n" + hvd::Table(rows);
  std::fputs(report.c_str(), stdout);
  if (out_path != nullptr) {
    FILE* f = std::fopen(out_path, "w");
    if (f != nullptr) {
      std::fputs(report.c_str(), f);
      std::fclose(f);
    }
  }
  return ok ? 0 : 1;
}
