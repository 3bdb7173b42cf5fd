#include "runtime/bootstrap.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "controller/store/net_address.h"
#include "runtime/common/job_keys.h"
#include "runtime/runtime.h"

namespace hvd {

Bootstrap::Bootstrap(BootstrapEnv env) : env_(std::move(env)) {
  if (!env_.getenv) env_.getenv = [](const char* name) -> const char* { return ::getenv(name); };
  if (!env_.setenv)
    env_.setenv = [](const char* name, const char* value) { ::setenv(name, value, 0); };
}

Bootstrap::~Bootstrap() = default;

Status Bootstrap::Start(std::unique_ptr<Runtime>* out) {
  LaunchEnv launch;
  HVD_RETURN_IF_ERROR(DetectLaunchEnv(env_.getenv, &launch));
  RuntimeOptions options;
  HVD_RETURN_IF_ERROR(RuntimeOptions::FromEnv(&options, launch.Overlay(env_.getenv)));
  HVD_RETURN_IF_ERROR(ChooseGlooAddress(launch, &options));
  std::shared_ptr<Store> store;
  HVD_RETURN_IF_ERROR(OpenJobStore(launch, options, &store_server_, &store));
  const std::string scope = keys::InitScope(options.job_id, generation_);
  HVD_RETURN_IF_ERROR(ExchangeCrossRanks(launch, *NewPrefixStore(store, scope), &options));
  if (!options.gloo_iface.empty() && env_.getenv("NCCL_SOCKET_IFNAME") == nullptr)
    env_.setenv("NCCL_SOCKET_IFNAME", options.gloo_iface.c_str());
  std::unique_ptr<Runtime> runtime;
  HVD_RETURN_IF_ERROR(Runtime::Create(options, NewPrefixStore(store, scope), &runtime, store));
  HVD_RETURN_IF_ERROR(store->Set(keys::Started(options.rank), std::to_string(::getpid())));
  for (const auto& ranks : options.process_sets) {
    int id = 0;
    HVD_RETURN_IF_ERROR(runtime->AddProcessSet(ranks, &id).Prepend("HVD_PROCESS_SETS"));
  }
  *out = std::move(runtime);
  ++generation_;
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
