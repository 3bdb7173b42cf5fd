#include "controller/loop/bootstrap.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "controller/loop/runtime.h"
#include "runtime/common/job_keys.h"
#include "runtime/store/net_address.h"

namespace hvd {

namespace {

// A failed start under dprun: if dprun saw a rank die, that is the cause to report
// (a peer's closed socket, or a wait it ended, rarely says which rank or how).
Status NameLostRank(const Status& failed, int rank, Store& launcher_store) {
  if (failed.code() != StatusCode::kRemoteError && failed.code() != StatusCode::kTimeout &&
      failed.code() != StatusCode::kInternal)
    return failed;
  std::string reason;
  if (!launcher_store.Get(keys::kLauncherAbortReason, std::chrono::milliseconds(1000), &reason)
           .ok() ||
      reason.empty())
    return failed;
  const std::string seen = "rank " + std::to_string(rank) + " in hvd_init";
  if (failed.message().find(reason) != std::string::npos)
    return Status::RemoteError(reason + " (" + seen + ")");
  return Status::RemoteError(reason + " (" + seen + " saw: " + failed.message() + ")");
}

// The heartbeat lost dprun's store. If the store takes no new connection either,
// dprun is gone, and nobody will end this rank: it ends itself, as dprun's teardown
// would (SIGTERM, then SIGKILL after kOrphanGrace). A rank started through a wrapper
// (sh -c) gets no signal when dprun dies, and one that prints nothing never meets a
// closed pipe, so without this it would run on. If the store still answers, only
// this connection broke: the rank carries on without a heartbeat.
void EndIfLauncherGone(const std::string& addr, const std::string& secret, int rank,
                       const Status& why) {
  std::string host;
  int port = 0;
  std::shared_ptr<Store> probe;
  if (ParseHostPort(addr, &host, &port).ok() &&
      ConnectTcpStore(host, port, secret, std::chrono::milliseconds(2000), &probe).ok()) {
    std::fprintf(stderr,
                 "hvd: rank %d: the heartbeat lost its connection to the store (%s), which "
                 "still answers; the heartbeat stops\n",
                 rank, why.message().c_str());
    return;
  }
  std::fprintf(stderr,
               "hvd: rank %d: the launcher is gone: its store takes no connection (%s); this "
               "rank ends (SIGTERM, then SIGKILL after %d s)\n",
               rank, why.message().c_str(), static_cast<int>(kOrphanGrace.count()));
  ::kill(::getpid(), SIGTERM);
  std::this_thread::sleep_for(kOrphanGrace);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace

Bootstrap::Bootstrap(BootstrapEnv env) : env_(std::move(env)) {
  if (!env_.getenv) env_.getenv = [](const char* name) -> const char* { return ::getenv(name); };
  if (!env_.setenv)
    env_.setenv = [](const char* name, const char* value) { ::setenv(name, value, 0); };
}

Bootstrap::~Bootstrap() = default;

void Bootstrap::LingerForStoreClients(std::chrono::milliseconds limit) const {
  if (!store_server_) return;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (store_server_->clients() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

Status Bootstrap::Start(std::unique_ptr<Runtime>* out) {
  LaunchEnv launch;
  HVD_RETURN_IF_ERROR(DetectLaunchEnv(env_.getenv, &launch));
  RuntimeOptions::GetEnv getenv = launch.Overlay(env_.getenv);
  RuntimeOptions options;
  HVD_RETURN_IF_ERROR(RuntimeOptions::FromEnv(&options, getenv));
  HVD_RETURN_IF_ERROR(ChooseGlooAddress(launch, &options));
  std::shared_ptr<Store> store;
  HVD_RETURN_IF_ERROR(OpenJobStore(launch, options, &store_server_, &store));
  // The launcher's view: the whole store, or in an elastic job this generation's part.
  std::shared_ptr<Store> launcher_view = store;
  const bool elastic = !options.elastic_id.empty();
  const int launched_rank = options.rank;  // dprun's numbering, which --start-timeout checks
  if (elastic) {
    ElasticAssignment a;
    HVD_RETURN_IF_ERROR(JoinElastic(store, options, &a));
    HVD_RETURN_IF_ERROR(RuntimeOptions::FromEnv(&options, a.Overlay(getenv)));
    HVD_RETURN_IF_ERROR(ChooseGlooAddress(launch, &options));
    launcher_view = NewPrefixStore(store, keys::ElasticScope(a.generation));
  }
  // An elastic generation's workers have started different numbers of runtimes; the
  // generation (in the job id) is what they share.
  const std::string scope = keys::InitScope(options.job_id, elastic ? 0 : generation_);
  // dprun (no other launcher, a store to connect to) records a rank that dies in
  // keys::kLauncherAbortReason: the waits of this start end on it, naming that rank,
  // rather than at HVD_TIMEOUT.
  const bool under_dprun = launch.launcher.empty() && !options.store_addr.empty();
  std::shared_ptr<Store> scoped = NewPrefixStore(store, scope);
  if (under_dprun)
    scoped = NewAbortableStore(scoped, launcher_view, keys::kLauncherAbortReason, kLauncherCheckPeriod);
  HVD_RETURN_IF_ERROR(ExchangeCrossRanks(launch, *scoped, &options));
  if (!options.gloo_iface.empty() && env_.getenv("NCCL_SOCKET_IFNAME") == nullptr)
    env_.setenv("NCCL_SOCKET_IFNAME", options.gloo_iface.c_str());
  std::unique_ptr<Runtime> runtime;
  Status created = Runtime::Create(options, scoped, &runtime, launcher_view);
  if (!created.ok()) return under_dprun ? NameLostRank(created, options.rank, *launcher_view) : created;
  if (under_dprun) {
    const std::string addr = options.store_addr, secret = options.store_secret;
    const int rank = options.rank;
    runtime->OnStoreLost([addr, secret, rank](const Status& why) {
      EndIfLauncherGone(addr, secret, rank, why);
    });
  }
  HVD_RETURN_IF_ERROR(store->Set(keys::Started(options.rank), std::to_string(::getpid())));
  if (launched_rank != options.rank)  // an elastic generation renumbered this worker
    HVD_RETURN_IF_ERROR(store->Set(keys::Started(launched_rank), std::to_string(::getpid())));
  for (const auto& ranks : options.process_sets) {
    int id = 0;
    HVD_RETURN_IF_ERROR(runtime->AddProcessSet(ranks, &id).Prepend("HVD_PROCESS_SETS"));
  }
  *out = std::move(runtime);
  ++generation_;
  return Status::OK();
}

// ---- Elastic jobs.

RuntimeOptions::GetEnv Bootstrap::ElasticAssignment::Overlay(RuntimeOptions::GetEnv base) const {
  auto values = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  const char* names[] = {"HVD_RANK", "HVD_SIZE", "HVD_LOCAL_RANK", "HVD_LOCAL_SIZE",
                         "HVD_CROSS_RANK", "HVD_CROSS_SIZE"};
  for (int i = 0; i < 6; ++i) values->emplace_back(names[i], std::to_string(topology[i]));
  values->emplace_back("HVD_JOB_ID", job_id);
  return [values, base](const char* name) -> const char* {
    for (const auto& [k, v] : *values)
      if (k == name) return v.c_str();
    return base(name);
  };
}

Status Bootstrap::JoinElastic(const std::shared_ptr<Store>& store, const RuntimeOptions& options,
                              ElasticAssignment* out) {
  const std::string& id = options.elastic_id;
  const auto deadline = std::chrono::steady_clock::now() + options.elastic_timeout;
  // A worker that ran generation g joins a later one: g failed, or changed.
  const int64_t want = elastic_generation_ + 1;
  bool requested = false;
  for (;;) {
    std::string text;
    int64_t latest = -1;
    if (store->Get(keys::kElasticGeneration, std::chrono::milliseconds(0), &text).ok())
      latest = std::strtoll(text.c_str(), nullptr, 10);
    if (latest >= want) {
      std::string a;
      if (!store->Get(keys::ElasticAssignment(latest, id), std::chrono::milliseconds(0), &a).ok())
        return Status::ShutDown("elastic worker " + id + " is not part of generation " +
                                std::to_string(latest) +
                                " (its host was removed or blacklisted, or the job is at --max-np)");
      out->generation = latest;
      std::istringstream in(a);
      for (int& v : out->topology) in >> v;
      if (!in) return Status::Internal("elastic worker " + id + ": bad assignment '" + a + "'");
      out->job_id = options.job_id + ".g" + std::to_string(latest);
      elastic_generation_ = latest;
      elastic_store_ = store;
      return Status::OK();
    }
    // After a generation this worker ran: if dprun saw nobody die, it must be asked.
    if (want > 0 && !requested) {
      int64_t n = 0;
      HVD_RETURN_IF_ERROR(store->Add(keys::kElasticResetRequest, 1, &n));
      requested = true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return Status::Timeout("elastic worker " + id + " waited " +
                             std::to_string(options.elastic_timeout.count() / 1000) +
                             " s (HVD_ELASTIC_TIMEOUT) for generation " + std::to_string(want) +
                             " from dprun");
    Status s = store->Wait({keys::ElasticScope(want) + "ready"}, std::chrono::milliseconds(1000));
    if (!s.ok() && s.code() != StatusCode::kTimeout) return s;
  }
}

Status Bootstrap::ElasticUpdatePending(bool* pending) const {
  *pending = false;
  if (!elastic_store_) return Status::OK();
  std::string text;
  if (elastic_store_->Get(keys::kElasticGeneration, std::chrono::milliseconds(0), &text).ok())
    *pending = std::strtoll(text.c_str(), nullptr, 10) > elastic_generation_;
  return Status::OK();
}

Status OpenJobStore(const LaunchEnv& launch, const RuntimeOptions& options,
                    std::unique_ptr<TcpStoreServer>* server, std::shared_ptr<Store>* store) {
  if (options.store_addr.empty()) {
    if (options.size > 1)
      return Status::InvalidArgument(
          "HVD_SIZE=" + std::to_string(options.size) +
          " but HVD_STORE_ADDR is not set: start the job with dprun (or mpirun, srun, torchrun)");
    *store = NewInMemoryStore();
    return Status::OK();
  }
  if (launch.serve_store && options.rank == 0) {
    if (*server == nullptr) {
      TcpStoreServer::Options opts;
      opts.host = launch.listen_host;
      opts.port = launch.listen_port;
      opts.secret = options.store_secret;
      opts.log = [](const std::string& line) {
        std::fprintf(stderr, "hvd: store (rank 0): %s\n", line.c_str());
      };
      HVD_RETURN_IF_ERROR(TcpStoreServer::Start(opts, server)
                              .Prepend("rank 0 serves the job's store (" + launch.launcher +
                                       " launch; see docs/multi-node.md)"));
    }
    *store = (*server)->LocalStore();
    return Status::OK();
  }
  std::string host;
  int port = 0;
  HVD_RETURN_IF_ERROR(ParseHostPort(options.store_addr, &host, &port).Prepend("HVD_STORE_ADDR"));
  Status s = ConnectTcpStore(host, port, options.store_secret, options.timeout, store);
  if (!s.ok() && !launch.launcher.empty())
    return s.Prepend("rank " + std::to_string(options.rank) + " (" + launch.launcher +
                     " launch) could not reach the store that rank 0 serves");
  return s;
}

Status ChooseGlooAddress(const LaunchEnv& launch, RuntimeOptions* options) {
  if (!launch.needs_gloo_address) return Status::OK();
  std::string address;
  HVD_RETURN_IF_ERROR(SourceAddressToward(launch.store_host, &address)
                          .Prepend("choosing the address Gloo binds (set HVD_GLOO_IFACE)"));
  if (IsLoopbackAddress(address))
    return Status::InvalidArgument(
        "this job spans nodes but the route to the store host '" + launch.store_host +
        "' is over loopback (" + address +
        "), which other nodes cannot reach: set HVD_GLOO_IFACE to the interface to use");
  options->gloo_hostname = address;
  return Status::OK();
}

Status ExchangeCrossRanks(const LaunchEnv& launch, Store& store, RuntimeOptions* options) {
  if (launch.exchange_cross_ranks) {
    const std::string all_key = keys::kLaunchLocalRanks;
    HVD_RETURN_IF_ERROR(store.Set(keys::LaunchLocalRank(options->rank),
                                  std::to_string(options->local_rank)));
    if (options->rank == 0) {
      std::string list;
      for (int r = 0; r < options->size; ++r) {
        std::string v;
        HVD_RETURN_IF_ERROR(
            store.Get(keys::LaunchLocalRank(r), options->timeout, &v)
                .Prepend("exchanging local ranks: rank " + std::to_string(r)));
        list += (r == 0 ? "" : ",") + v;
      }
      HVD_RETURN_IF_ERROR(store.Set(all_key, list));
    }
    std::string list;
    HVD_RETURN_IF_ERROR(store.Get(all_key, options->timeout, &list)
                            .Prepend("exchanging local ranks (waiting for rank 0)"));
    std::vector<int> local_ranks(options->size);
    size_t pos = 0;
    for (int r = 0; r < options->size; ++r) {
      const size_t end = std::min(list.find(',', pos), list.size());
      local_ranks[r] = std::atoi(list.substr(pos, end - pos).c_str());
      pos = end + 1;
    }
    CrossRanks(local_ranks, options->rank, &options->cross_rank, &options->cross_size);
  }
  return options->Validate();
}

}  // namespace hvd
