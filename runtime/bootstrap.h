// The steps with I/O that hvd_init takes after DetectLaunchEnv (runtime/launch_env.h)
// and RuntimeOptions::FromEnv, in order: pick Gloo's address, open the job's store
// (serving it from rank 0 when another launcher started the job), and work out the
// cross ranks through it.
#ifndef HVD_RUNTIME_BOOTSTRAP_H_
#define HVD_RUNTIME_BOOTSTRAP_H_

#include <memory>

#include "controller/store/store.h"
#include "controller/store/tcp_store.h"
#include "runtime/common/options.h"
#include "runtime/common/status.h"
#include "runtime/launch_env.h"

namespace hvd {

// Sets options->gloo_hostname when launch.needs_gloo_address: the source address of
// the route to the store host. It needs no other rank, so a rank that cannot work out
// its address fails on its own, before any rank depends on the store.
Status ChooseGlooAddress(const LaunchEnv& launch, RuntimeOptions* options);

// Gives this rank its store: an in-memory one for a job of one without a store address;
// for rank 0 of a detected launch, the TcpStoreServer it serves (started into *server,
// which the caller keeps for the process's life, or reused if already there);
// otherwise a connection to options.store_addr, retried until options.timeout.
Status OpenJobStore(const LaunchEnv& launch, const RuntimeOptions& options,
                    std::unique_ptr<TcpStoreServer>* server, std::shared_ptr<Store>* store);

// When launch.exchange_cross_ranks, sets options->cross_rank and cross_size from every
// rank's local rank, exchanged through `store` (keys under "hvd_launch/"; rank 0
// gathers them and publishes the list). Then validates *options.
Status ExchangeCrossRanks(const LaunchEnv& launch, Store& store, RuntimeOptions* options);

}  // namespace hvd

#endif  // HVD_RUNTIME_BOOTSTRAP_H_
