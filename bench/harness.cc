#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace hvd {
namespace bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double TimeStep(const Peer& p, Comm* comm) {
  comm->Barrier();
  const auto t0 = SteadyClock::now();
  p.step();
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Poisons, runs one step of `p` and checks it; the check is agreed across ranks.
bool CheckedStep(const Workload& w, Buffers* b, const Peer& p, Comm* comm, double* seconds,
                 std::string* error) {
  PoisonReceive(b);
  *seconds = TimeStep(p, comm);
  const std::string mine = CheckReceive(w, *b, comm->size());
  std::vector<double> bad{mine.empty() ? 0.0 : 1.0};
  comm->AllreduceMax(&bad);
  if (bad[0] == 0) return true;
  *error = p.name + " on " + w.name + " gave a wrong result" +
           (mine.empty() ? " on another rank" : " on rank " + std::to_string(comm->rank()) + ": " + mine);
  return false;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string f;
  while (std::getline(in, f, ',')) out.push_back(f);
  return out;
}

const char kCsvHeader[] =
    "ranks,ops,workload,tensors,bytes,peer,iters,median_ms,min_ms,max_ms,algbw_GBps,busbw_GBps";

}  // namespace

bool RunWorkload(const Workload& w, Buffers* b, const std::vector<Peer>& peers, Comm* comm,
                 const HarnessOptions& opts, const std::string& ops, std::vector<Result>* out,
                 std::string* error) {
  // 0. Settling rounds, untimed; rank 0's clock decides when they end.
  if (opts.settle_s > 0) {
    const auto start = SteadyClock::now();
    for (bool more = true; more;) {
      for (const auto& p : peers) TimeStep(p, comm);
      std::vector<double> elapsed{
          comm->rank() == 0 ? std::chrono::duration<double>(SteadyClock::now() - start).count()
                            : 0.0};
      comm->AllreduceMax(&elapsed);
      more = elapsed[0] < opts.settle_s;
    }
  }
  // 1. Warm-up, checked. A peer whose first step alone takes the whole budget
  // skips the rest of its warm-up (decided on the slowest rank's time, so every
  // rank runs the same steps). dprun's first step negotiates in full and fills
  // the response cache, so it is slower than the rest.
  std::vector<double> warm(peers.size(), 0);
  for (size_t p = 0; p < peers.size(); ++p) {
    if (!CheckedStep(w, b, peers[p], comm, &warm[p], error)) return false;
    std::vector<double> first{warm[p]};
    comm->AllreduceMax(&first);
    if (first[0] > opts.budget_s) continue;
    for (int i = 1; i < opts.warmup; ++i) warm[p] = TimeStep(peers[p], comm);
  }
  comm->AllreduceMax(&warm);

  // 2. Iterations per peer, the same on every rank.
  std::vector<int> iters(peers.size());
  int rounds = 0;
  for (size_t p = 0; p < peers.size(); ++p) {
    iters[p] = opts.iters > 0 ? opts.iters
                              : std::clamp(static_cast<int>(opts.budget_s / std::max(warm[p], 1e-6)),
                                           opts.min_iters, opts.max_iters);
    rounds = std::max(rounds, iters[p]);
  }

  // 3. Interleaved timed rounds of `run` steps per peer; each peer's last step
  // is checked.
  const int run = std::max(1, opts.run);
  std::vector<std::vector<double>> times(peers.size());
  for (int k0 = 0; k0 < rounds; k0 += run) {
    for (size_t p = 0; p < peers.size(); ++p) {
      for (int k = k0; k < std::min(k0 + run, iters[p]); ++k) {
        double t = 0;
        if (k == iters[p] - 1) {
          if (!CheckedStep(w, b, peers[p], comm, &t, error)) return false;
        } else {
          t = TimeStep(peers[p], comm);
        }
        times[p].push_back(t);
      }
    }
  }

  // 4. Slowest rank per step, then the median.
  for (size_t p = 0; p < peers.size(); ++p) {
    comm->AllreduceMax(&times[p]);
    Result r;
    r.ranks = comm->size();
    r.ops = ops;
    r.workload = w.name;
    r.tensors = static_cast<int>(w.tensors.size());
    r.bytes = w.total_bytes();
    r.peer = peers[p].name;
    r.iters = iters[p];
    r.median_s = Median(times[p]);
    r.min_s = *std::min_element(times[p].begin(), times[p].end());
    r.max_s = *std::max_element(times[p].begin(), times[p].end());
    out->push_back(r);
  }
  return true;
}

bool WriteCsv(const std::string& path, const std::vector<Result>& results, std::string* error) {
  std::ofstream f(path);
  if (!f) {
    *error = "cannot write '" + path + "'";
    return false;
  }
  f << kCsvHeader << "\n";
  char line[512];
  for (const auto& r : results) {
    std::snprintf(line, sizeof line, "%d,%s,%s,%d,%lld,%s,%d,%.6f,%.6f,%.6f,%.4f,%.4f\n", r.ranks,
                  r.ops.c_str(), r.workload.c_str(), r.tensors, static_cast<long long>(r.bytes),
                  r.peer.c_str(), r.iters, r.median_s * 1e3, r.min_s * 1e3, r.max_s * 1e3,
                  r.algbw_gbps(), r.busbw_gbps());
    f << line;
  }
  if (!f) {
    *error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

bool ReadCsv(const std::string& path, std::vector<Result>* out, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot read '" + path + "'";
    return false;
  }
  std::string line;
  if (!std::getline(f, line) || line != kCsvHeader) {
    *error = "'" + path + "' does not start with the benchmark CSV header";
    return false;
  }
  int lineno = 1;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    const auto v = SplitCsv(line);
    if (v.size() != 12) {
      *error = path + ":" + std::to_string(lineno) + ": expected 12 fields";
      return false;
    }
    Result r;
    r.ranks = std::atoi(v[0].c_str());
    r.ops = v[1];
    r.workload = v[2];
    r.tensors = std::atoi(v[3].c_str());
    r.bytes = std::atoll(v[4].c_str());
    r.peer = v[5];
    r.iters = std::atoi(v[6].c_str());
    r.median_s = std::atof(v[7].c_str()) / 1e3;
    r.min_s = std::atof(v[8].c_str()) / 1e3;
    r.max_s = std::atof(v[9].c_str()) / 1e3;
    out->push_back(r);
  }
  return true;
}

std::string FormatTable(const std::vector<Result>& results, const std::vector<Result>& mpi) {
  // workload -> peer -> result, in first-seen workload order.
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, const Result*>> by;
  for (const auto& r : results) {
    if (!by.count(r.workload)) order.push_back(r.workload);
    by[r.workload][r.peer] = &r;
  }
  const int ranks = results.empty() ? 0 : results[0].ranks;
  std::map<std::string, const Result*> best_mpi;
  for (const auto& r : mpi) {
    if (r.ranks != ranks) continue;
    const Result*& best = best_mpi[r.workload];
    if (!best || r.median_s < best->median_s) best = &r;
  }
  auto ms = [](const Result* r) {
    char s[32];
    std::snprintf(s, sizeof s, "%.3f", r->median_s * 1e3);
    return std::string(s);
  };
  auto bw = [](const Result* r) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f", r->busbw_gbps());
    return std::string(s);
  };
  auto ratio = [](const Result* a, const Result* b) {
    if (!a || !b || b->median_s <= 0) return std::string("-");
    char s[32];
    std::snprintf(s, sizeof s, "%.2f", a->median_s / b->median_s);
    return std::string(s);
  };
  std::string t =
      "| workload | bytes | tensors | dprun ms | dprun busbw | gloo fused ms | gloo fused busbw "
      "| gloo per-tensor ms | mpi ms | mpi busbw | dprun/gloo-fused | dprun/gloo-per-tensor | "
      "dprun/mpi |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& wl : order) {
    auto& m = by[wl];
    const Result* d = m.count("dprun") ? m["dprun"] : nullptr;
    const Result* gf = m.count("gloo_fused") ? m["gloo_fused"] : nullptr;
    const Result* any = d ? d : gf ? gf : m.begin()->second;
    // One tensor: per tensor is fused. Many, with the per-tensor peer left out
    // (--peers): nothing to show.
    const Result* gt = m.count("gloo_per_tensor") ? m["gloo_per_tensor"]
                       : any->tensors == 1    ? gf
                                              : nullptr;
    const Result* mp = best_mpi.count(wl) ? best_mpi[wl] : nullptr;
    std::string mpi_ms = "-";
    if (mp) mpi_ms = ms(mp) + (mp->peer == "mpi_per_tensor" && mp->tensors > 1 ? " (per-tensor)" : "");
    t += "| " + wl + " | " + FormatBytes(any->bytes) + " | " + std::to_string(any->tensors) + " | " +
         (d ? ms(d) : "-") + " | " + (d ? bw(d) : "-") + " | " + (gf ? ms(gf) : "-") + " | " +
         (gf ? bw(gf) : "-") + " | " + (gt ? ms(gt) : "-") + " | " + mpi_ms + " | " +
         (mp ? bw(mp) : "-") + " | " + ratio(d, gf) + " | " + ratio(d, gt) + " | " +
         ratio(d, mp) + " |\n";
  }
  return t;
}

std::string FormatPeerTable(const std::vector<Result>& results) {
  std::vector<std::string> workloads, peers;
  std::map<std::pair<std::string, std::string>, const Result*> by;
  for (const auto& r : results) {
    if (std::find(workloads.begin(), workloads.end(), r.workload) == workloads.end())
      workloads.push_back(r.workload);
    if (std::find(peers.begin(), peers.end(), r.peer) == peers.end()) peers.push_back(r.peer);
    by[{r.workload, r.peer}] = &r;
  }
  std::string t = "| workload | bytes | tensors |";
  std::string rule = "|---|---:|---:|";
  for (const auto& p : peers) {
    t += " " + p + " ms | " + p + " busbw |";
    rule += "---:|---:|";
  }
  t += "\n" + rule + "\n";
  for (const auto& w : workloads) {
    const Result* any = nullptr;
    for (const auto& p : peers)
      if (by.count({w, p})) any = by[{w, p}];
    t += "| " + w + " | " + FormatBytes(any->bytes) + " | " + std::to_string(any->tensors) + " |";
    for (const auto& p : peers) {
      char cell[64] = " - | - |";
      if (by.count({w, p}))
        std::snprintf(cell, sizeof cell, " %.3f | %.2f |", by[{w, p}]->median_s * 1e3,
                      by[{w, p}]->busbw_gbps());
      t += cell;
    }
    t += "\n";
  }
  return t;
}

}  // namespace bench
}  // namespace hvd
