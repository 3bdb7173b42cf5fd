#include "launcher/elastic_membership.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

namespace hvd {
namespace launcher {

ElasticMembership::ElasticMembership(int min_np, int max_np, int reset_limit, BlacklistCooldown cooldown)
    : min_np_(min_np), max_np_(max_np), reset_limit_(reset_limit), cooldown_(std::move(cooldown)) {}

ElasticMembership::Clock::duration ElasticMembership::CooldownFor(int blacklisting) const {
  double jitter = 0;
  if (cooldown_.jitter) {
    jitter = cooldown_.jitter();
  } else {
    static thread_local std::mt19937 random(std::random_device{}());
    jitter = std::uniform_real_distribution<double>(0.0, 1.0)(random);
  }
  const double lo = cooldown_.lo_s, hi = cooldown_.hi_s;
  const double s = std::clamp(lo * std::ldexp(1.0, std::min(blacklisting, 30)) + jitter * lo, lo, hi);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

void ElasticMembership::Add(const std::string& id, const std::string& host) {
  workers_.push_back({id, host, true});
}

int ElasticMembership::running() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
}

int ElasticMembership::RunningOn(const std::string& host) const {
  return static_cast<int>(WorkersOn(host).size());
}

std::vector<std::string> ElasticMembership::WorkersOn(const std::string& host) const {
  std::vector<std::string> ids;
  for (const Worker& w : workers_)
    if (w.running && w.host == host) ids.push_back(w.id);
  return ids;
}

std::string ElasticMembership::Ended(const std::string& id, bool failed, Clock::time_point now,
                                     bool* reset) {
  *reset = false;
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const Worker& w) { return w.id == id; });
  if (it == workers_.end() || !it->running) return "";
  it->running = false;
  if (!failed && InLatest(id)) finishing_ = true;
  if (!failed || !InLatest(id)) return "";  // done, or already left out
  HostRecord& host = hosts_[it->host];
  if (++host.failures >= kBlacklistFailures) {
    host.blacklisted_until = now + CooldownFor(++host.blacklistings);
    host.failures = 0;
  }
  if (running() < min_np_)
    return std::to_string(running()) + " rank(s) left, fewer than --min-np " +
           std::to_string(min_np_);
  const std::string refused = ResetRefused();
  if (!refused.empty()) return refused;
  *reset = true;
  return "";
}

std::string ElasticMembership::ResetRefused() const {
  if (resets_ < reset_limit_) return "";
  return "the job was reset " + std::to_string(resets_) + " time(s) (--reset-limit " +
         std::to_string(reset_limit_) + ")";
}

void ElasticMembership::Stopped(const std::string& id) {
  for (Worker& w : workers_)
    if (w.id == id) w.running = false;
}

bool ElasticMembership::Blacklisted(const std::string& host, Clock::time_point now) const {
  auto it = hosts_.find(host);
  return it != hosts_.end() && now < it->second.blacklisted_until;
}

std::vector<ElasticMembership::Assignment> ElasticMembership::Upcoming() const {
  std::vector<const Worker*> members;
  for (const Worker& w : workers_)
    if (w.running) members.push_back(&w);
  const int size = static_cast<int>(members.size());
  // Local ranks by host, in rank order; cross ranks among the workers of each local rank.
  std::map<std::string, int> on_host, host_size;
  for (const Worker* w : members) ++host_size[w->host];
  std::vector<int> local(size);
  std::map<int, int> with_local, cross_size;
  for (int r = 0; r < size; ++r) {
    local[r] = on_host[members[r]->host]++;
    ++cross_size[local[r]];
  }
  std::vector<Assignment> out;
  for (int r = 0; r < size; ++r) {
    const int cross = with_local[local[r]]++;
    out.push_back({members[r]->id, members[r]->host,
                   RankTopology{r, size, local[r], host_size[members[r]->host], cross,
                                cross_size[local[r]]}});
  }
  return out;
}

int64_t ElasticMembership::NextGeneration(
    std::vector<std::pair<std::string, std::string>>* assignments) {
  assignments->clear();
  latest_.clear();
  for (const Assignment& a : Upcoming()) {
    const RankTopology& t = a.topology;
    assignments->emplace_back(
        a.id, std::to_string(t.rank) + " " + std::to_string(t.size) + " " +
                  std::to_string(t.local_rank) + " " + std::to_string(t.local_size) + " " +
                  std::to_string(t.cross_rank) + " " + std::to_string(t.cross_size));
    latest_.push_back(a.id);
  }
  if (generation_ >= 0) ++resets_;
  return ++generation_;
}

bool ElasticMembership::InLatest(const std::string& id) const {
  return std::find(latest_.begin(), latest_.end(), id) != latest_.end();
}

}  // namespace launcher
}  // namespace hvd
