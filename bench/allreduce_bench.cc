// allreduce_bench: dprun's all-reduce against raw Gloo, in one run, on the same
// buffers (see bench/harness.h for the timing method and docs/benchmarks.md for
// results). Run it under the launcher:
//
//   dprun -np 2 build/bench/allreduce_bench [--workload all|sizes|resnet50|small]
//       [--iters N] [--budget SECONDS] [--csv FILE] [--mpi-csv FILE]
//       [--resnet50-sizes FILE] [--peers LIST] [--barrier dprun|gloo]
//       [--settle SECONDS] [--run N] [--layout separate|bucket] [--scaling-csv FILE]
//       [--scaling-label TEXT] [--comm gloo|dprun]
//
// Peers, all float32 sum, all out of place (send buffers are never modified):
//   dprun            the C API. One buffer: hvd_allreduce. Many tensors: every
//                    tensor enqueued with hvd_allreduce_async in DDP order, then
//                    every handle waited on; the runtime negotiates and fuses.
//   gloo_fused       gloo::allreduce (ring, gloo::sum<float>) on its own Gloo
//                    context. Many tensors: copied into one contiguous buffer, one
//                    all-reduce, copied out; both copies are inside the timing, as
//                    dprun's are. One buffer, or many in --layout bucket: copied
//                    send -> recv, reduced in place.
//   gloo_per_tensor  copy send -> recv and one gloo::allreduce per tensor (only
//                    for workloads of more than one tensor).
//   ring,            dprun's own Gloo all-reduce (GlooBackend::AllreducePieces over
//   halving_doubling the tensors) on the bench's context, each algorithm forced
//                    (runtime/transport/allreduce_algorithm.h); more than one rank,
//                    only when --peers names them.
// --peers runs only the named peers (for profiling one of them).
// --run N: each timed round runs N consecutive steps of every peer in turn
// (default 10; 1 alternates peers step by step, see bench/harness.h).
// --settle runs untimed rounds of every peer for that long first (to let
// HVD_AUTOTUNE finish its search before the timed steps; bench/autotune_bench.sh).
// --barrier picks the barrier that starts every timed step, for every peer:
// dprun's (default; shared memory between ranks on one host) or Gloo's (TCP). A
// step's time is the slowest rank's, from its own barrier exit, so it includes
// how far apart the barrier released the ranks, which for Gloo's TCP barrier is
// far more than for dprun's (docs/benchmarks.md, "The machine").
// --layout bucket lays each workload's tensors end to end in one send and one
// receive buffer (a framework's gradient bucket) instead of one allocation each.
// --scaling-csv FILE appends what bench/scaling_bench.sh needs beyond step times:
// the slowest rank's hvd_init and hvd_shutdown, and rank 0's negotiation per cycle
// over dprun's steps (WriteScalingCsv); --scaling-label adds TEXT to its ops column.
// --comm dprun runs the harness's barrier and maxima over dprun instead of a Gloo
// context of the bench's own, so only the dprun peer runs (a second Gloo full mesh
// of 128 ranks on one host runs out of ports); hvd_shutdown's time is then rank 0's.
// --mpi-csv adds the dprun/mpi ratio from an mpi_allreduce_bench CSV of the same
// rank count (a separate run: that ratio is across runs).
//
// The Gloo context rendezvous through the job's store (the C API does not expose
// it): the same HVD_STORE_ADDR, HVD_STORE_SECRET, HVD_RANK and HVD_SIZE that dprun
// sets, under the key prefix "<HVD_JOB_ID>/bench/".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>

#include "bench/harness.h"
#include "bench/workloads.h"
#include "bindings/c/c_api_internal.h"
#include "bindings/c/hvd.h"
#include "runtime/store/store.h"
#include "runtime/store/tcp_store.h"
#include "runtime/transport/gloo/gloo_backend.h"

namespace hvd {
namespace bench {
namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "allreduce_bench: %s\n", msg.c_str());
  std::exit(1);
}

void CheckHvd(hvd_status_t s, const char* what) {
  if (s != HVD_SUCCESS)
    Die(std::string(what) + ": " + hvd_status_string(s) + ": " + hvd_last_error());
}

std::string Env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

using GlooReduce = void (*)(void*, const void*, const void*, size_t);

class GlooComm : public Comm {
 public:
  // dprun_barrier: Barrier() is dprun's (hvd_barrier) instead of Gloo's.
  GlooComm(std::shared_ptr<gloo::Context> ctx, bool dprun_barrier)
      : ctx_(std::move(ctx)), dprun_barrier_(dprun_barrier) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  const std::shared_ptr<gloo::Context>& context() const { return ctx_; }
  void Barrier() override {
    if (size() == 1) return;
    if (dprun_barrier_) {
      CheckHvd(hvd_barrier(0), "hvd_barrier");
      return;
    }
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(NextTag());
    gloo::barrier(opts);
  }
  void AllreduceMax(std::vector<double>* v) override {
    if (size() == 1 || v->empty()) return;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(v->data(), v->size());
    opts.setReduceFunction(static_cast<GlooReduce>(&gloo::max<double>));
    opts.setTag(NextTag());
    gloo::allreduce(opts);
  }
  // Ring all-reduce (sum) of `count` floats at `buf`, in place.
  void SumRing(float* buf, size_t count) {
    if (size() == 1 || count == 0) return;
    gloo::AllreduceOptions opts(ctx_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(buf, count);
    opts.setReduceFunction(static_cast<GlooReduce>(&gloo::sum<float>));
    opts.setTag(NextTag());
    gloo::allreduce(opts);
  }

 private:
  uint32_t NextTag() { return next_tag_++; }
  std::shared_ptr<gloo::Context> ctx_;
  const bool dprun_barrier_;
  uint32_t next_tag_ = 1;
};

// The harness's collectives over dprun itself (--comm dprun): no Gloo context of the
// bench's own, so only the dprun peer runs. At 128 Gloo ranks on one host a second
// full mesh runs the host out of ports (each Gloo pair listens on one).
class DprunComm : public Comm {
 public:
  DprunComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Barrier() override { CheckHvd(hvd_barrier(0), "hvd_barrier"); }
  void AllreduceMax(std::vector<double>* v) override {
    if (size_ == 1 || v->empty()) return;
    const std::string name = "bench.max." + std::to_string(next_++);
    CheckHvd(hvd_allreduce(name.c_str(), v->data(), v->data(), static_cast<int64_t>(v->size()),
                           HVD_FLOAT64, HVD_MAX),
             "hvd_allreduce (bench max)");
  }

 private:
  int rank_, size_;
  int64_t next_ = 0;
};

// The bench's own Gloo context, through the job's store (or alone, for 1 rank).
std::shared_ptr<gloo::Context> ConnectBenchContext(int rank, int size) {
  const std::chrono::milliseconds timeout(120000);
  std::shared_ptr<Store> store;
  const std::string addr = Env("HVD_STORE_ADDR");
  if (addr.empty()) {
    if (size != 1) Die("HVD_SIZE > 1 but HVD_STORE_ADDR is unset: run under dprun");
    store = NewInMemoryStore();
  } else {
    std::string host;
    int port = 0;
    Status s = ParseHostPort(addr, &host, &port);
    if (s.ok()) s = ConnectTcpStore(host, port, Env("HVD_STORE_SECRET"), timeout, &store);
    if (!s.ok()) Die("bench store: " + s.ToString());
  }
  const std::string job = Env("HVD_JOB_ID");
  auto prefixed = NewPrefixStore(store, (job.empty() ? "" : job + "/") + "bench/");
  std::shared_ptr<gloo::transport::Device> device;
  // Where dprun placed this rank (its host's address across hosts; 127.0.0.1 here).
  const std::string gloo_host = Env("HVD_GLOO_HOSTNAME");
  const int local_rank = std::atoi(Env("HVD_LOCAL_RANK", "0").c_str());
  Status s = CreateGlooDevice(GlooBindHostname(gloo_host.empty() ? "127.0.0.1" : gloo_host, local_rank),
                              Env("HVD_GLOO_IFACE"),
                              &device);
  std::shared_ptr<gloo::Context> ctx;
  if (s.ok()) s = ConnectGlooContext(prefixed, device, rank, size, timeout, &ctx);
  if (!s.ok()) Die("bench Gloo context: " + s.ToString());
  return ctx;
}

// dprun's own Gloo all-reduces on the bench's context, each algorithm forced: the
// ring and halving-doubling side by side on the same buffers (GlooBackend, as the
// runtime runs them over Gloo; HVD_ALLREDUCE_ALGORITHM picks between them there).
struct AlgorithmPeers {
  std::unique_ptr<GlooBackend> ring, halving;
};

AlgorithmPeers MakeAlgorithmPeers(const std::shared_ptr<gloo::Context>& ctx) {
  AllreduceAlgorithmOptions ring, halving;
  ring.mode = AllreduceAlgorithmOptions::Mode::kRing;
  halving.mode = AllreduceAlgorithmOptions::Mode::kHalvingDoubling;
  AlgorithmPeers p;
  p.ring = std::make_unique<GlooBackend>(ctx, PieceRingOptions(), ring);
  p.halving = std::make_unique<GlooBackend>(ctx, PieceRingOptions(), halving);
  return p;
}

void AddAlgorithmPeers(const Workload& w, Buffers* b, const AlgorithmPeers& algorithms,
                       std::vector<Peer>* peers) {
  for (auto [name, backend] : {std::make_pair("ring", algorithms.ring.get()),
                               std::make_pair("halving_doubling", algorithms.halving.get())}) {
    peers->push_back({name, [&w, b, backend = backend, name = name] {
                        std::vector<AllreducePiece> pieces(w.tensors.size());
                        for (size_t t = 0; t < pieces.size(); ++t)
                          pieces[t] = {b->send[t].data(), b->recv[t].data(), w.tensors[t].count};
                        const Status s = backend->AllreducePieces(pieces, DataType::kFloat32,
                                                                  ReduceOp::kSum, nullptr);
                        if (!s.ok()) Die(std::string(name) + ": " + s.ToString());
                      }});
  }
}

// The peers of `w`; without `gloo` (--comm dprun), dprun alone.
std::vector<Peer> MakePeers(const Workload& w, Buffers* b, GlooComm* gloo,
                            std::vector<float>* fused, bool bucket) {
  std::vector<Peer> peers;
  const size_t n = w.tensors.size();
  if (n == 1) {
    peers.push_back({"dprun", [&w, b] {
                       CheckHvd(hvd_allreduce(w.tensors[0].name.c_str(), b->send[0].data(),
                                              b->recv[0].data(), w.tensors[0].count, HVD_FLOAT32,
                                              HVD_SUM),
                                "hvd_allreduce");
                     }});
    if (gloo == nullptr) return peers;
    peers.push_back({"gloo_fused", [b, gloo] {
                       std::memcpy(b->recv[0].data(), b->send[0].data(), b->send[0].size() * 4);
                       gloo->SumRing(b->recv[0].data(), b->recv[0].size());
                     }});
    return peers;
  }
  fused->assign(w.total_count(), 0.0f);
  peers.push_back({"dprun", [&w, b, n] {
                     std::vector<hvd_handle_t*> handles(n, nullptr);
                     for (size_t t = 0; t < n; ++t)
                       CheckHvd(hvd_allreduce_async(w.tensors[t].name.c_str(), b->send[t].data(),
                                                    b->recv[t].data(), w.tensors[t].count,
                                                    HVD_FLOAT32, HVD_SUM, &handles[t]),
                                "hvd_allreduce_async");
                     for (size_t t = 0; t < n; ++t) {
                       CheckHvd(hvd_wait(handles[t], -1), "hvd_wait");
                       hvd_handle_release(handles[t]);
                     }
                   }});
  if (gloo == nullptr) return peers;
  if (bucket) {  // one buffer each way already: copied send -> recv, reduced in place
    peers.push_back({"gloo_fused", [b, gloo, &w] {
                       const size_t total = static_cast<size_t>(w.total_count());
                       std::memcpy(b->recv[0].data(), b->send[0].data(), total * 4);
                       gloo->SumRing(b->recv[0].data(), total);
                     }});
  } else {
    peers.push_back({"gloo_fused", [b, gloo, fused, n] {
                     float* p = fused->data();
                     for (size_t t = 0; t < n; ++t) {
                       std::memcpy(p, b->send[t].data(), b->send[t].size() * 4);
                       p += b->send[t].size();
                     }
                     gloo->SumRing(fused->data(), fused->size());
                     p = fused->data();
                     for (size_t t = 0; t < n; ++t) {
                       std::memcpy(b->recv[t].data(), p, b->recv[t].size() * 4);
                       p += b->recv[t].size();
                     }
                   }});
  }
  peers.push_back({"gloo_per_tensor", [b, gloo, n] {
                     for (size_t t = 0; t < n; ++t) {
                       std::memcpy(b->recv[t].data(), b->send[t].data(), b->send[t].size() * 4);
                       gloo->SumRing(b->recv[t].data(), b->recv[t].size());
                     }
                   }});
  return peers;
}

// --scaling-csv: rank 0's negotiation over dprun's steps (the first, which fills
// the response cache, left out), from the runtime's counters.
struct NegotiationSample {
  int64_t steps = 0, cycles = 0, cpu_ns = 0, coordinate_cpu_ns = 0;
  int64_t process_cpu_ns = 0;  // this process's CPU (all its threads) in those steps
  bool first_seen = false;
};

int64_t ProcessCpuNanos() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (static_cast<int64_t>(u.ru_utime.tv_sec) + u.ru_stime.tv_sec) * 1000000000 +
         (static_cast<int64_t>(u.ru_utime.tv_usec) + u.ru_stime.tv_usec) * 1000;
}

Controller::Stats GlobalSetStats() {
  std::shared_ptr<Runtime> rt;
  if (!capi::Current(&rt).ok()) return {};
  return rt->NegotiationStats(0);
}

// Wraps the dprun peer's step so that each step adds its cycles and CPU to *sample.
void SampleNegotiation(std::vector<Peer>* peers, NegotiationSample* sample) {
  for (Peer& p : *peers) {
    if (p.name != "dprun") continue;
    auto inner = std::move(p.step);
    p.step = [inner, sample] {
      const Controller::Stats before = GlobalSetStats();
      const int64_t cpu_before = ProcessCpuNanos();
      inner();
      const int64_t cpu_after = ProcessCpuNanos();
      const Controller::Stats after = GlobalSetStats();
      if (!sample->first_seen) {
        sample->first_seen = true;
        return;
      }
      ++sample->steps;
      sample->process_cpu_ns += cpu_after - cpu_before;
      sample->cycles += after.cycles - before.cycles;
      sample->cpu_ns += after.cpu_ns - before.cpu_ns;
      sample->coordinate_cpu_ns += after.coordinate_cpu_ns - before.coordinate_cpu_ns;
    };
  }
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Flags {
  std::string workload = "all";
  std::string csv;
  std::string mpi_csv;
  std::string resnet50;
  std::string peers;  // comma list of peer names to run; empty: all
  std::string scaling_csv;
  std::string scaling_label;  // appended to the CSV's ops column
  std::string comm = "gloo";  // the harness's barrier and max: "gloo" or "dprun"
  bool dprun_barrier = true;
  Layout layout = Layout::kSeparate;
  HarnessOptions harness;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--workload") {
      f.workload = value();
    } else if (a == "--iters") {
      f.harness.iters = std::atoi(value().c_str());
      if (f.harness.iters <= 0) Die("--iters must be positive");
    } else if (a == "--warmup") {
      f.harness.warmup = std::atoi(value().c_str());
      if (f.harness.warmup <= 0) Die("--warmup must be a positive number of steps");
    } else if (a == "--run") {
      f.harness.run = std::atoi(value().c_str());
      if (f.harness.run <= 0) Die("--run must be a positive number of steps");
    } else if (a == "--budget") {
      f.harness.budget_s = std::atof(value().c_str());
      if (!(f.harness.budget_s > 0)) Die("--budget must be a positive number of seconds");
    } else if (a == "--settle") {
      f.harness.settle_s = std::atof(value().c_str());
      if (!(f.harness.settle_s >= 0)) Die("--settle must be a number of seconds, 0 or more");
    } else if (a == "--csv") {
      f.csv = value();
    } else if (a == "--mpi-csv") {
      f.mpi_csv = value();
    } else if (a == "--scaling-csv") {
      f.scaling_csv = value();
    } else if (a == "--scaling-label") {
      f.scaling_label = value();
    } else if (a == "--comm") {
      f.comm = value();
      if (f.comm != "gloo" && f.comm != "dprun") Die("--comm must be gloo or dprun, got '" + f.comm + "'");
    } else if (a == "--resnet50-sizes") {
      f.resnet50 = value();
    } else if (a == "--peers") {
      f.peers = value();
    } else if (a == "--barrier") {
      const std::string v = value();
      if (v != "dprun" && v != "gloo") Die("--barrier must be dprun or gloo, got '" + v + "'");
      f.dprun_barrier = v == "dprun";
    } else if (a == "--layout") {
      const std::string v = value();
      if (!ParseLayout(v, &f.layout)) Die("--layout must be separate or bucket, got '" + v + "'");
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: dprun -np N allreduce_bench [--workload all|sizes|resnet50|small[,...]]\n"
          "         [--iters N] [--warmup N] [--budget SECONDS] [--csv FILE] [--mpi-csv FILE]\n"
          "         [--resnet50-sizes FILE]\n"
          "         [--peers dprun,gloo_fused,gloo_per_tensor,ring,halving_doubling]\n"
          "         [--barrier dprun|gloo] [--settle SECONDS] [--run N]\n"
          "         [--layout separate|bucket] [--scaling-csv FILE] [--scaling-label TEXT]\n"
          "         [--comm gloo|dprun]\n");
      std::exit(0);
    } else {
      Die("unknown argument '" + a + "' (try --help)");
    }
  }
  return f;
}

// Appends to `path` (a header first if it is new) one row per measure, in long form
// (ranks,ops,workload,metric,value): per run, the slowest rank's hvd_init,
// bench-context connect and hvd_shutdown seconds (workload "-"); per workload, each
// peer's median step in ms (step_ms:<peer>) and rank 0's negotiation over dprun's
// steps: cycles per step, controller CPU per cycle and per step, and the part in
// Coordinate per cycle (microseconds); and every rank's process CPU per dprun step,
// summed over the ranks (job_cpu_ms_per_step).
void WriteScalingCsv(const std::string& path, int size, const std::string& ops,
                     const std::vector<Workload>& workloads, const std::vector<Result>& results,
                     const std::vector<NegotiationSample>& samples,
                     const std::vector<double>& slowest, const std::vector<double>& job_cpu_ms) {
  std::FILE* probe = std::fopen(path.c_str(), "r");
  const bool fresh = probe == nullptr;
  if (probe) std::fclose(probe);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) Die("cannot open --scaling-csv " + path);
  if (fresh) std::fprintf(f, "ranks,ops,workload,metric,value\n");
  auto row = [&](const std::string& workload, const std::string& metric, double value) {
    std::fprintf(f, "%d,%s,%s,%s,%.6g\n", size, ops.c_str(), workload.c_str(), metric.c_str(),
                 value);
  };
  row("-", "init_s", slowest[0]);
  row("-", "bench_connect_s", slowest[1]);
  row("-", "shutdown_s", slowest[2]);
  for (const Result& r : results) row(r.workload, "step_ms:" + r.peer, r.median_s * 1e3);
  for (size_t i = 0; i < workloads.size(); ++i) {
    const NegotiationSample& n = samples[i];
    if (n.steps == 0) continue;
    const double cycles = std::max<int64_t>(1, n.cycles);
    row(workloads[i].name, "cycles_per_step", static_cast<double>(n.cycles) / n.steps);
    row(workloads[i].name, "controller_cpu_us_per_cycle", n.cpu_ns / 1e3 / cycles);
    row(workloads[i].name, "controller_cpu_us_per_step", n.cpu_ns / 1e3 / n.steps);
    row(workloads[i].name, "coordinate_cpu_us_per_cycle", n.coordinate_cpu_ns / 1e3 / cycles);
    row(workloads[i].name, "job_cpu_ms_per_step", job_cpu_ms[i]);
  }
  std::fclose(f);
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  std::vector<Workload> workloads;
  std::string error;
  if (!MakeWorkloads(flags.workload, ResNet50SizesPath(flags.resnet50, HVD_SOURCE_DIR),
                     &workloads, &error))
    Die(error);

  const auto init_start = std::chrono::steady_clock::now();
  CheckHvd(hvd_init(), "hvd_init");
  const double init_s = SecondsSince(init_start);
  int rank = 0, size = 1;
  CheckHvd(hvd_rank(&rank), "hvd_rank");
  CheckHvd(hvd_size(&size), "hvd_size");
  const auto connect_start = std::chrono::steady_clock::now();
  std::unique_ptr<GlooComm> gloo;
  if (flags.comm == "gloo")
    gloo = std::make_unique<GlooComm>(ConnectBenchContext(rank, size), flags.dprun_barrier);
  DprunComm dprun_comm(rank, size);
  Comm* comm = gloo ? static_cast<Comm*>(gloo.get()) : &dprun_comm;
  const double connect_s = SecondsSince(connect_start);
  const char* plane = "?";
  CheckHvd(hvd_host_backend(0, &plane), "hvd_host_backend");
  const std::string ops = Env("HVD_CPU_OPERATIONS", "default") + " (" + plane + ")" +
                          (flags.scaling_label.empty() ? "" : " " + flags.scaling_label);

  const AlgorithmPeers algorithms =
      size > 1 && gloo ? MakeAlgorithmPeers(gloo->context()) : AlgorithmPeers();
  std::vector<Result> results;
  std::vector<NegotiationSample> samples(workloads.size());
  for (size_t wi = 0; wi < workloads.size(); ++wi) {
    const Workload& w = workloads[wi];
    Buffers b;
    FillBuffers(w, rank, &b, flags.layout);
    std::vector<float> fused;
    auto peers = MakePeers(w, &b, gloo.get(), &fused, flags.layout == Layout::kBucket);
    if (size > 1 && gloo && !flags.peers.empty()) AddAlgorithmPeers(w, &b, algorithms, &peers);
    if (!flags.peers.empty()) {
      const std::string list = "," + flags.peers + ",";
      peers.erase(std::remove_if(peers.begin(), peers.end(),
                                 [&](const Peer& p) {
                                   return list.find("," + p.name + ",") == std::string::npos;
                                 }),
                  peers.end());
      if (peers.empty()) Die("--peers " + flags.peers + " selects no peer of " + w.name);
    }
    SampleNegotiation(&peers, &samples[wi]);
    const size_t before = results.size();
    if (!RunWorkload(w, &b, peers, comm, flags.harness, ops, &results, &error)) Die(error);
    if (rank == 0) {
      std::fprintf(stderr, "%-10s", w.name.c_str());
      for (size_t i = before; i < results.size(); ++i)
        std::fprintf(stderr, "  %s %.3f ms (%d iters)", results[i].peer.c_str(),
                     results[i].median_s * 1e3, results[i].iters);
      std::fprintf(stderr, "\n");
    }
  }

  if (rank == 0) {
    std::vector<Result> mpi;
    if (!flags.mpi_csv.empty() && !ReadCsv(flags.mpi_csv, &mpi, &error))
      std::fprintf(stderr, "allreduce_bench: no MPI ratios: %s\n", error.c_str());
    std::printf("dprun all-reduce, %d ranks, float32 sum, CPU operations: %s, results checked on every rank\n\n%s",
                size, ops.c_str(), FormatTable(results, mpi).c_str());
    if (!flags.csv.empty() && !WriteCsv(flags.csv, results, &error)) Die(error);
  }
  // Every rank's CPU per dprun step, summed: the work the cores share. Over dprun
  // (--comm dprun) before its shutdown, whose time is then rank 0's own.
  std::vector<double> job_cpu_ms(workloads.size(), 0);
  auto sum_cpu = [&] {
    for (size_t i = 0; i < workloads.size(); ++i) {
      std::vector<double> each(size, 0);
      if (samples[i].steps > 0) each[rank] = samples[i].process_cpu_ns / 1e6 / samples[i].steps;
      comm->AllreduceMax(&each);
      for (double v : each) job_cpu_ms[i] += v;
    }
  };
  std::vector<double> slowest{init_s, connect_s, 0};
  if (!flags.scaling_csv.empty() && !gloo) {
    sum_cpu();
    comm->AllreduceMax(&slowest);
  }
  const auto shutdown_start = std::chrono::steady_clock::now();
  CheckHvd(hvd_shutdown(), "hvd_shutdown");
  slowest[2] = SecondsSince(shutdown_start);
  if (!flags.scaling_csv.empty()) {
    if (gloo) {
      sum_cpu();
      gloo->AllreduceMax(&slowest);
    }
    if (rank == 0)
      WriteScalingCsv(flags.scaling_csv, size, ops, workloads, results, samples, slowest, job_cpu_ms);
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace hvd

int main(int argc, char** argv) { return hvd::bench::Main(argc, argv); }
