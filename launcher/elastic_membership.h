// ElasticMembership: who belongs to an elastic job (dprun --min-np), generation by
// generation; pure, no I/O (the Supervisor publishes what it decides).
//
// A worker is one process dprun started, named by an id ("w0", "w1", ...) it gets as
// HVD_ELASTIC_ID, on a host. Each generation numbers the workers running then 0..M-1,
// keeping the order in which they were started, so ranks move down over a lost worker
// and new workers come last. Rules:
//   - a worker that exits with code 0 is done: no new generation, and once a worker
//     of the latest generation is done the job is finishing: no worker starts
//     after it (as Horovod's elastic driver; else discovery would fill the freed
//     slot with a worker that waits for ranks that have finished);
//   - a worker that fails (non-zero, a signal) is gone: a new generation of the rest,
//     unless fewer than min_np would remain or the reset limit is reached, which end
//     the job with the cause; the limit bounds every new generation, a discovered
//     change's too (ResetRefused);
//   - a host whose workers failed kBlacklistFailures times is blacklisted: no worker
//     starts there for its cooldown (BlacklistCooldown), which grows each time;
//   - workers may be added while fewer than max_np run.
#ifndef HVD_LAUNCHER_ELASTIC_MEMBERSHIP_H_
#define HVD_LAUNCHER_ELASTIC_MEMBERSHIP_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launcher/rank_placement.h"

namespace hvd {
namespace launcher {

constexpr int kBlacklistFailures = 2;

// How long a blacklisted host stays out (dprun --blacklist-cooldown-range, as
// horovodrun's): the n-th time, lo * 2^n + jitter * lo seconds (jitter uniform in
// [0, 1)), but at least lo and at most hi. The default, 60 and 60, is a minute.
struct BlacklistCooldown {
  int lo_s = 60, hi_s = 60;
  // Draws the jitter; null: a random one. Tests pass a fixed one.
  std::function<double()> jitter;
};

class ElasticMembership {
 public:
  using Clock = std::chrono::steady_clock;

  ElasticMembership(int min_np, int max_np, int reset_limit, BlacklistCooldown cooldown = {});

  // A worker was started on `host`; it belongs to the next generation.
  void Add(const std::string& id, const std::string& host);
  int running() const;
  // How many workers may start once `leaving` of the running ones have stopped: up
  // to max_np in all, none once a worker is done.
  int Vacancies(int leaving) const {
    return finishing_ ? 0 : std::max(0, max_np_ - running() + leaving);
  }
  // The workers running on `host`.
  int RunningOn(const std::string& host) const;
  // The ids of the workers running on `host`.
  std::vector<std::string> WorkersOn(const std::string& host) const;

  // Worker `id` ended. Returns "" when the job goes on (a new generation is due if
  // *reset), else why it must end.
  std::string Ended(const std::string& id, bool failed, Clock::time_point now, bool* reset);
  // Why no further generation may follow (the reset limit: every generation after
  // the first counts, whether a worker failed or discovery added or removed
  // workers, as horovodrun's --reset-limit), or "" if one may.
  std::string ResetRefused() const;
  // dprun stops worker `id` (its host is gone): it leaves, neither failed nor done.
  void Stopped(const std::string& id);
  // Whether a worker of its generation ended with code 0 (Ended, not failed).
  bool finishing() const { return finishing_; }

  // Whether `host` is blacklisted at `now`.
  bool Blacklisted(const std::string& host, Clock::time_point now) const;

  // A running worker's place in the next generation.
  struct Assignment {
    std::string id, host;
    RankTopology topology;
  };
  // The running workers' places in the next generation, in rank order, before it
  // is numbered: a new worker's variables are set from it before it starts.
  std::vector<Assignment> Upcoming() const;

  // Numbers the running workers for a new generation (as Upcoming); returns its
  // number and each worker's "rank size local_rank local_size cross_rank
  // cross_size", in rank order.
  int64_t NextGeneration(std::vector<std::pair<std::string, std::string>>* assignments);

  // Whether worker `id` is in the latest generation.
  bool InLatest(const std::string& id) const;
  int64_t generation() const { return generation_; }
  int resets() const { return resets_; }

 private:
  struct Worker {
    std::string id, host;
    bool running = true;
  };
  struct HostRecord {
    int failures = 0;
    int blacklistings = 0;
    Clock::time_point blacklisted_until{};
  };
  Clock::duration CooldownFor(int blacklisting) const;

  const int min_np_, max_np_, reset_limit_;
  const BlacklistCooldown cooldown_;
  std::vector<Worker> workers_;  // in the order started
  std::map<std::string, HostRecord> hosts_;
  std::vector<std::string> latest_;  // the latest generation's ids
  int64_t generation_ = -1;
  int resets_ = 0;
  bool finishing_ = false;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_ELASTIC_MEMBERSHIP_H_
