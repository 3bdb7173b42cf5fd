// mpi_allreduce_bench: MPI_Allreduce on the workloads of allreduce_bench, timed and
// checked by the same harness, so bench/run_bench.sh can set dprun beside MPI.
//
//   mpirun --allow-run-as-root -np 2 --mca btl self,vader --mca oob_tcp_if_include lo
//       build/bench/mpi_allreduce_bench [--workload ...] [--iters N] [--budget S] [--run N]
//       [--csv FILE] [--resnet50-sizes FILE]
//
// Peers, float32 MPI_SUM on MPI_COMM_WORLD, out of place like allreduce_bench's:
//   mpi_fused       many tensors: copied into one contiguous buffer, one
//                   MPI_Allreduce(MPI_IN_PLACE), copied out (copies timed). One
//                   buffer: MPI_Allreduce(send, recv).
//   mpi_per_tensor  one MPI_Allreduce(send, recv) per tensor (many tensors only).
// Open MPI chooses its algorithm by size (coll/tuned); with btl vader ranks talk
// through shared memory.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/workloads.h"

namespace hvd {
namespace bench {
namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "mpi_allreduce_bench: %s\n", msg.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void CheckMpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  Die(std::string(what) + ": " + std::string(msg, len));
}

class MpiComm : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Barrier() override { CheckMpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void AllreduceMax(std::vector<double>* v) override {
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, v->data(), static_cast<int>(v->size()), MPI_DOUBLE,
                           MPI_MAX, MPI_COMM_WORLD),
             "MPI_Allreduce");
  }

 private:
  int rank_ = 0, size_ = 1;
};

// MPI counts are int; the largest workload (256 MiB) is 2^26 floats.
int Count(size_t n) {
  if (n > static_cast<size_t>(INT32_MAX)) Die("tensor too large for an MPI count");
  return static_cast<int>(n);
}

std::vector<Peer> MakePeers(const Workload& w, Buffers* b, std::vector<float>* fused) {
  std::vector<Peer> peers;
  const size_t n = w.tensors.size();
  if (n == 1) {
    peers.push_back({"mpi_fused", [b] {
                       CheckMpi(MPI_Allreduce(b->send[0].data(), b->recv[0].data(),
                                              Count(b->send[0].size()), MPI_FLOAT, MPI_SUM,
                                              MPI_COMM_WORLD),
                                "MPI_Allreduce");
                     }});
    return peers;
  }
  fused->assign(w.total_count(), 0.0f);
  peers.push_back({"mpi_fused", [b, fused, n] {
                     float* p = fused->data();
                     for (size_t t = 0; t < n; ++t) {
                       std::memcpy(p, b->send[t].data(), b->send[t].size() * 4);
                       p += b->send[t].size();
                     }
                     CheckMpi(MPI_Allreduce(MPI_IN_PLACE, fused->data(), Count(fused->size()),
                                            MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                              "MPI_Allreduce");
                     p = fused->data();
                     for (size_t t = 0; t < n; ++t) {
                       std::memcpy(b->recv[t].data(), p, b->recv[t].size() * 4);
                       p += b->recv[t].size();
                     }
                   }});
  peers.push_back({"mpi_per_tensor", [b, n] {
                     for (size_t t = 0; t < n; ++t)
                       CheckMpi(MPI_Allreduce(b->send[t].data(), b->recv[t].data(),
                                              Count(b->send[t].size()), MPI_FLOAT, MPI_SUM,
                                              MPI_COMM_WORLD),
                                "MPI_Allreduce");
                   }});
  return peers;
}

int Main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::string workload = "all", csv, resnet50, error;
  HarnessOptions harness;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--workload") {
      workload = value();
    } else if (a == "--iters") {
      harness.iters = std::atoi(value().c_str());
      if (harness.iters <= 0) Die("--iters must be positive");
    } else if (a == "--run") {
      harness.run = std::atoi(value().c_str());
      if (harness.run <= 0) Die("--run must be a positive number of steps");
    } else if (a == "--budget") {
      harness.budget_s = std::atof(value().c_str());
      if (!(harness.budget_s > 0)) Die("--budget must be a positive number of seconds");
    } else if (a == "--csv") {
      csv = value();
    } else if (a == "--resnet50-sizes") {
      resnet50 = value();
    } else {
      Die("unknown argument '" + a + "'");
    }
  }
  std::vector<Workload> workloads;
  if (!MakeWorkloads(workload, ResNet50SizesPath(resnet50, HVD_SOURCE_DIR), &workloads, &error))
    Die(error);

  MpiComm comm;
  std::vector<Result> results;
  for (const auto& w : workloads) {
    Buffers b;
    FillBuffers(w, comm.rank(), &b);
    std::vector<float> fused;
    const auto peers = MakePeers(w, &b, &fused);
    if (!RunWorkload(w, &b, peers, &comm, harness, "mpi", &results, &error)) Die(error);
    if (comm.rank() == 0) std::fprintf(stderr, "%s done\n", w.name.c_str());
  }
  if (comm.rank() == 0) {
    std::printf("MPI_Allreduce, %d ranks, float32 sum, results checked on every rank\n\n%s",
                comm.size(), FormatPeerTable(results).c_str());
    if (!csv.empty() && !WriteCsv(csv, results, &error)) Die(error);
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hvd

int main(int argc, char** argv) { return hvd::bench::Main(argc, argv); }
