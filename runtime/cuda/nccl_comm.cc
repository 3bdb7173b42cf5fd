#include "runtime/cuda/nccl_comm.h"

#include <cstring>
#include <thread>

#include "runtime/cuda/cuda_util.h"

namespace hvd {
namespace cuda {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

}  // namespace

Status NcclComm::Create(Store* store, int rank, int size, std::chrono::milliseconds timeout,
                        std::unique_ptr<NcclComm>* out) {
  ncclUniqueId id;
  if (rank == 0) {
    HVD_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId"));
    HVD_RETURN_IF_ERROR(store->Set(kUniqueIdKey, std::string(id.internal, sizeof(id.internal)))
                            .Prepend("publishing the ncclUniqueId"));
  } else {
    std::string value;
    HVD_RETURN_IF_ERROR(store->Get(kUniqueIdKey, timeout, &value)
                            .Prepend("rank " + std::to_string(rank) +
                                     " waiting for rank 0's ncclUniqueId"));
    if (value.size() != sizeof(id.internal))
      return Status::Internal("the ncclUniqueId in the store has " + std::to_string(value.size()) +
                              " bytes, not " + std::to_string(sizeof(id.internal)));
    std::memcpy(id.internal, value.data(), sizeof(id.internal));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  std::unique_ptr<NcclComm> c(new NcclComm(comm, rank, size, timeout));
  const std::string what = "creating the NCCL communicator (rank " + std::to_string(rank) + " of " +
                           std::to_string(size) + ")";
  Status s;
  {
    std::lock_guard<std::mutex> lock(c->mu_);
    if (r == ncclInProgress) {
      s = comm != nullptr ? c->WaitLocked(what)
                          : Status::Internal(what + ": NCCL returned no communicator");
    } else if (r != ncclSuccess) {
      s = NcclStatus(r, comm, what);
    }
    if (!s.ok()) c->FailLocked(s);
  }
  HVD_RETURN_IF_ERROR(s);
  *out = std::move(c);
  return Status::OK();
}

NcclComm::~NcclComm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status NcclComm::WaitLocked(const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return NcclStatus(r, comm_, what + " (ncclCommGetAsyncError)");
    if (state == ncclSuccess) return Status::OK();
    if (state != ncclInProgress) return NcclStatus(state, comm_, what);
    if (std::chrono::steady_clock::now() > deadline)
      return Status::Timeout(what + " did not finish within " + SecondsText(timeout_) +
                             " (HVD_TIMEOUT); the NCCL communicator was aborted");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NcclComm::FailLocked(const Status& why) {
  if (broken_.ok()) broken_ = why;
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status NcclComm::Run(const std::string& what, const std::function<ncclResult_t(ncclComm_t)>& call) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  const ncclResult_t r = call(comm_);
  Status s;
  if (r == ncclInProgress) {
    s = WaitLocked(what);
  } else if (r != ncclSuccess) {
    s = NcclStatus(r, comm_, what);
  }
  if (!s.ok()) FailLocked(s);
  return s;
}

Status NcclComm::CheckAsyncError() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok() || comm_ == nullptr) return broken_;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  Status s;
  if (r != ncclSuccess) {
    s = NcclStatus(r, comm_, "ncclCommGetAsyncError");
  } else if (state != ncclSuccess && state != ncclInProgress) {
    s = NcclStatus(state, comm_, "NCCL reported an asynchronous error");
  }
  if (!s.ok()) FailLocked(s);
  return s;
}

void NcclComm::Abort(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  FailLocked(why);
}

Status NcclComm::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

}  // namespace cuda
}  // namespace hvd
