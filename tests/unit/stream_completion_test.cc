// Stream-ordered completion (work.h, DeviceFence) with a fake device, on CPU: a
// device backend marks a response's Works enqueued as soon as it has queued the
// collective; a consumer then waits only for that (the host does not wait for the
// device), and orders its own stream after the collective through the fence. The
// fake device records, per stream, what it was told to wait for, and "finishes" a
// collective when the test says so. Fences model pooled events: one is recycled
// only once no Work holds it (buffer lifetime across stream reuse).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "runtime/data/device_ops.h"
#include "runtime/data/executor.h"
#include "runtime/data/work.h"

namespace hvd {
namespace {

using std::chrono::milliseconds;

// A device: streams are op logs; events are ids from a pool.
struct FakeDevice {
  std::map<void*, std::vector<std::string>> streams;
  std::vector<int> free_events;
  int next_event = 0;
  int Get() {
    if (free_events.empty()) return next_event++;
    const int e = free_events.back();
    free_events.pop_back();
    return e;
  }
};

class FakeFence : public DeviceFence {
 public:
  FakeFence(FakeDevice* dev, int event) : dev_(dev), event_(event) {}
  ~FakeFence() override { dev_->free_events.push_back(event_); }
  Status OrderStream(void* stream) override {
    dev_->streams[stream].push_back("wait event " + std::to_string(event_));
    return Status::OK();
  }
  int event() const { return event_; }

 private:
  FakeDevice* dev_;
  const int event_;
};

// Queues each response on the fake device: marks its Works enqueued with a fresh
// fence and keeps them, to be completed by Finish (the device being done).
class FakeStreamOps : public DeviceOps {
 public:
  explicit FakeStreamOps(FakeDevice* dev) : dev_(dev) {}
  Status Execute(const Response&, const std::vector<TensorEntry*>& entries) override {
    auto fence = std::make_shared<FakeFence>(dev_, dev_->Get());
    for (TensorEntry* e : entries) {
      if (e == nullptr) continue;
      e->work->MarkEnqueued(fence);
      running_.push_back(e->work);
    }
    return Status::OK();
  }
  void Finish(const Status& s = Status::OK()) {
    for (auto& w : running_) w->Complete(s);
    running_.clear();
  }

 private:
  FakeDevice* dev_;
  std::vector<std::shared_ptr<Work>> running_;
};

Response Allreduce(const std::string& name) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.names = {name};
  r.counts = {4};
  r.device = 0;
  return r;
}

struct Harness {
  FakeDevice dev;
  FakeStreamOps* ops = nullptr;
  Executor executor{nullptr};
  Harness() {
    executor.SetDeviceOpsFactory([this](int, std::unique_ptr<DeviceOps>* out) {
      auto ops_owned = std::make_unique<FakeStreamOps>(&dev);
      ops = ops_owned.get();
      *out = std::move(ops_owned);
      return Status::OK();
    });
  }
  std::shared_ptr<Work> Run(const std::string& name) {
    TensorEntry e;
    e.name = name;
    e.device = 0;
    e.work = std::make_shared<Work>(name);
    EXPECT_TRUE(executor.Execute(Allreduce(name), {&e}).ok());
    return e.work;
  }
};

void* const kConsumer = reinterpret_cast<void*>(0x100);

TEST(StreamCompletion, TheConsumerStreamWaitsAndTheHostDoesNot) {
  Harness h;
  std::shared_ptr<Work> w = h.Run("grad");
  // Queued, not done: the host returns at once, and would still wait for completion.
  EXPECT_TRUE(w->WaitEnqueued(milliseconds(0)).ok());
  EXPECT_TRUE(w->PollEnqueued());
  EXPECT_FALSE(w->Poll());
  EXPECT_EQ(w->Wait(milliseconds(0)).code(), StatusCode::kInProgress);
  ASSERT_TRUE(w->OrderAfter(kConsumer).ok());
  EXPECT_EQ(h.dev.streams[kConsumer], std::vector<std::string>{"wait event 0"});

  h.ops->Finish();
  EXPECT_TRUE(w->Wait(milliseconds(0)).ok());
  // Done: a stream ordered now has nothing to wait for.
  EXPECT_TRUE(w->OrderAfter(kConsumer).ok());
  EXPECT_EQ(h.dev.streams[kConsumer].size(), 1u);
}

TEST(StreamCompletion, AHostWorkCountsAsEnqueuedOnlyOnceDone) {
  Work w("host");
  EXPECT_EQ(w.WaitEnqueued(milliseconds(0)).code(), StatusCode::kInProgress);
  Status s = w.OrderAfter(kConsumer);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << s.ToString();
  EXPECT_NE(s.message().find("'host'"), std::string::npos) << s.message();
  w.Complete(Status::OK());
  EXPECT_TRUE(w.WaitEnqueued(milliseconds(0)).ok());
  EXPECT_TRUE(w.OrderAfter(kConsumer).ok());
}

TEST(StreamCompletion, AFailureBeforeTheEnqueueIsWhatTheWaiterGets) {
  FakeDevice dev;
  Work w("bad");
  w.Complete(Status::Mismatch("shapes differ"));
  w.MarkEnqueued(std::make_shared<FakeFence>(&dev, dev.Get()));  // too late: ignored
  EXPECT_EQ(dev.free_events.size(), 1u);  // the fence was not kept
  EXPECT_EQ(w.WaitEnqueued(milliseconds(0)).code(), StatusCode::kMismatch);
  EXPECT_EQ(w.OrderAfter(kConsumer).code(), StatusCode::kMismatch);
}

TEST(StreamCompletion, ASleepingWaiterIsWokenByTheEnqueue) {
  FakeDevice dev;
  Work w("late");
  std::atomic<bool> returned{false};
  Status got = Status::Internal("not set");
  std::thread waiter([&] {
    got = w.WaitEnqueued(milliseconds(10000));  // bounded: a missed wake fails, not hangs
    returned = true;
  });
  std::this_thread::sleep_for(milliseconds(30));  // long past the spin: asleep
  EXPECT_FALSE(returned.load());
  w.MarkEnqueued(std::make_shared<FakeFence>(&dev, dev.Get()));
  waiter.join();
  EXPECT_TRUE(got.ok()) << got.ToString();
  EXPECT_FALSE(w.Poll());  // still running on the device
}

TEST(StreamCompletion, AnEventIsReusedOnlyOnceNoWorkHoldsIt) {
  Harness h;
  std::shared_ptr<Work> first = h.Run("a");
  h.ops->Finish();
  // `first` is done but its handle is still held: its event stays out of the pool,
  // so the next collective records another one, and a late consumer of `first`
  // cannot end up waiting on a later collective.
  std::shared_ptr<Work> second = h.Run("b");
  ASSERT_TRUE(second->OrderAfter(kConsumer).ok());
  EXPECT_EQ(h.dev.streams[kConsumer], std::vector<std::string>{"wait event 1"});
  h.ops->Finish();
  first.reset();  // the handle released: its event goes back
  second.reset();
  EXPECT_EQ(h.dev.free_events.size(), 2u);
  std::shared_ptr<Work> third = h.Run("c");
  ASSERT_TRUE(third->OrderAfter(kConsumer).ok());
  EXPECT_EQ(h.dev.streams[kConsumer].back().rfind("wait event ", 0), 0u);
  EXPECT_EQ(h.dev.next_event, 2);  // recycled, none created
  h.ops->Finish();
}

}  // namespace
}  // namespace hvd

namespace hvd {
namespace {

struct NullFence : DeviceFence {
  Status OrderStream(void*) override { return Status::OK(); }
};

// A runtime-owned result in device memory (allgather, alltoall, reducescatter of a
// GPU tensor) is readable once queued: its address, size and shape are final, and
// the reader orders its stream after the collective (hvd_handle_result).
TEST(StreamCompletion, ADeviceResultIsReadableOnceQueued) {
  Work w("gathered");
  EXPECT_EQ(w.ResultReady().code(), StatusCode::kInProgress);
  w.device_result().data = std::shared_ptr<void>(new char[8], [](void* p) {
    delete[] static_cast<char*>(p);
  });
  w.device_result().bytes = 8;
  w.device_result().device = 0;
  EXPECT_EQ(w.ResultReady().code(), StatusCode::kInProgress);  // not queued yet
  w.MarkEnqueued(std::make_shared<NullFence>());
  EXPECT_TRUE(w.ResultReady().ok());
  EXPECT_FALSE(w.Poll());

  // Queued without a device result (a device allreduce): nothing to read early.
  Work plain("grad");
  plain.MarkEnqueued(std::make_shared<NullFence>());
  EXPECT_EQ(plain.ResultReady().code(), StatusCode::kInProgress);
  // A host result: only once done; a failure is what the reader gets.
  Work host("host");
  EXPECT_EQ(host.ResultReady().code(), StatusCode::kInProgress);
  host.Complete(Status::OK());
  EXPECT_TRUE(host.ResultReady().ok());
  Work failed("failed");
  failed.device_result().device = 0;
  failed.Complete(Status::Internal("NCCL broke"));
  failed.MarkEnqueued(std::make_shared<NullFence>());  // ignored after completion
  EXPECT_EQ(failed.ResultReady().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace hvd
