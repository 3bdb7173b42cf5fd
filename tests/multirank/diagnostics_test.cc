// Straggler report, timeline and stall inspector in real multi-rank runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <atomic>
#include <thread>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void SumStep(Runtime& rt, const std::string& name, int rank) {
  std::vector<float> v(16, static_cast<float>(rank));
  Status s = AllreduceSync(rt, name, v.data(), v.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TEST(Straggler, TheDeliberatelySlowRankIsNamed) {
  const int size = 3, steps = 20;
  std::string report;
  StragglerTracker::RankStats slow{}, fast{};
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (int step = 0; step < steps; ++step) {
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      SumStep(rt, "grad", rank);  // full path first, then cache hits
    }
    if (rank == 0) {
      report = rt.StragglerReport();
      slow = rt.straggler()->Stats(1);
      fast = rt.straggler()->Stats(2);
    } else {
      EXPECT_EQ(rt.straggler(), nullptr);
      EXPECT_THAT(rt.StragglerReport(), HasSubstr("rank 0 (the coordinator) does"));
    }
  });
  EXPECT_GE(slow.times_last, steps * 8 / 10) << report;
  EXPECT_LE(fast.times_last, steps / 5) << report;
  EXPECT_GT(slow.mean_lag_ms, 10.0) << report;
  EXPECT_GE(slow.p95_lag_ms, slow.mean_lag_ms * 0.5) << report;
  EXPECT_THAT(report, HasSubstr("rank     last   share   mean lag    p95 lag"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Parses a trace with Python's json module and prints "phase tensor" per event.
std::string TraceSummary(const std::string& path, bool tolerant) {
  const std::string py =
      "import json,sys; t=open(sys.argv[1]).read().rstrip()\n"
      "if sys.argv[2]=='1' and not t.endswith(']'): t=t.rstrip(',')+']'\n"
      "ev=json.loads(t); rows={e['tid']:e['args']['name'] for e in ev if e.get('name')=='thread_name'}\n"
      "print('events', len(ev))\n"
      "[print(e['name'], rows.get(e.get('tid'), '-')) for e in ev if e.get('ph') in ('X','i') and 'tid' in e]\n";
  const std::string script = "/tmp/hvd_trace_check.py";
  std::ofstream(script) << py;
  CommandResult r = RunCommand("python3 " + script + " " + path + " " + (tolerant ? "1" : "0"),
                               std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

// Both backends read a fused tensor's input and write its output themselves, inside
// ALLREDUCE; a prescaled tensor is first scaled into its output (COPY_IN).
TEST(Timeline, TracesEveryPhaseOfEveryTensorAndStaysValidWhileRunning) {
  for (const std::string ops : {"gloo", "shm"}) {
    const std::string path = ::testing::TempDir() + "hvd_timeline_test.json";
    std::remove(path.c_str());
    RunRanks(2, [&](int rank, Runtime& rt) {
      for (int step = 0; step < 3; ++step) {
        std::vector<std::vector<float>> bufs(3, std::vector<float>(64, 1.0f));
        std::vector<std::shared_ptr<Work>> works(3);
        for (int i = 0; i < 3; ++i) {
          TensorEntry a;
          a.name = "layer" + std::to_string(i) + ".grad";
          a.input = a.output = bufs[i].data();
          a.shape = {64};
          if (i == 2) a.prescale_factor = 0.5;
          ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works[i]).ok());
        }
        for (auto& w : works) ASSERT_TRUE(w->Wait(std::chrono::milliseconds(20000)).ok());
      }
      std::shared_ptr<Work> barrier;
      ASSERT_TRUE(rt.Barrier(0, &barrier).ok());
      ASSERT_TRUE(barrier->Wait(std::chrono::milliseconds(20000)).ok());
      if (rank == 0) {
        // Mid-run, the file already parses in the tolerant form.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const std::string partial = TraceSummary(path, true);
        EXPECT_THAT(partial, HasSubstr("NEGOTIATE_ALLREDUCE layer0.grad"));
      }
    }, [&](RuntimeOptions& o) {
      o.timeline_path = path;
      o.cpu_operations = ops;
    });
    const std::string summary = TraceSummary(path, false);  // strict: closed with ]
    // Horovod's names: NEGOTIATE_<collective>, then the collective.
    for (const char* phase : {"NEGOTIATE_ALLREDUCE", "WAIT", "ALLREDUCE"})
      EXPECT_THAT(summary, HasSubstr(std::string(phase) + " layer2.grad")) << ops << summary;
    EXPECT_THAT(summary, HasSubstr("NEGOTIATE_BARRIER __barrier.0")) << ops << summary;
    EXPECT_THAT(summary, HasSubstr("COPY_IN layer2.grad")) << ops << summary;
    EXPECT_THAT(summary, Not(HasSubstr("COPY_IN layer0.grad"))) << ops << summary;
    EXPECT_THAT(summary, Not(HasSubstr("COPY_OUT"))) << ops << summary;
    EXPECT_THAT(summary, HasSubstr("rank 1 ready layer1.grad"));
    EXPECT_THAT(ReadFile(path), HasSubstr("\"cached\": true"));  // later steps come from the cache
  }
}

// start_timeline / stop_timeline at run time (Horovod's dynamic timeline): each
// file holds exactly the steps run while it was open, is complete JSON once
// stopped, marks cycles only when asked, and a second start on the same file
// keeps it.
TEST(Timeline, StartsAndStopsWhileRunning) {
  const std::string dir = ::testing::TempDir();
  const std::string a = dir + "hvd_tl_a.json", b = dir + "hvd_tl_b.json";
  std::remove(a.c_str());
  std::remove(b.c_str());
  RunRanks(2, [&](int rank, Runtime& rt) {
    SumStep(rt, "before", rank);
    ASSERT_TRUE(rt.StartTimeline(a, true).ok());
    SumStep(rt, "during.a", rank);
    ASSERT_TRUE(rt.StartTimeline(a, true).ok());  // the same file: kept, not truncated
    SumStep(rt, "during.a2", rank);
    ASSERT_TRUE(rt.StartTimeline(b, false).ok());  // another file replaces it
    SumStep(rt, "during.b", rank);
    rt.StopTimeline();
    rt.StopTimeline();  // idempotent
    SumStep(rt, "after", rank);
    Status bad = rt.StartTimeline(dir + "no/such/dir/t.json", false);
    if (rank == 0) {
      EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(bad.message(), HasSubstr("no/such/dir/t.json"));
    } else {
      EXPECT_TRUE(bad.ok()) << "only rank 0 writes a timeline";
    }
  });
  const std::string sa = TraceSummary(a, false), sb = TraceSummary(b, false);
  EXPECT_THAT(sa, HasSubstr("ALLREDUCE during.a"));
  EXPECT_THAT(sa, HasSubstr("ALLREDUCE during.a2"));
  EXPECT_THAT(sa, HasSubstr("CYCLE_START"));
  EXPECT_THAT(sa, Not(HasSubstr("before")));
  EXPECT_THAT(sa, Not(HasSubstr("during.b")));
  EXPECT_THAT(sb, HasSubstr("ALLREDUCE during.b"));
  EXPECT_THAT(sb, Not(HasSubstr("CYCLE_START")));
  EXPECT_THAT(sb, Not(HasSubstr("after")));
  EXPECT_THAT(ReadFile(a), HasSubstr("start_time_since_epoch_in_micros"));
}

TEST(Stall, InspectorNamesMissingRanksAndShutdownTimeFailsTheTensorEverywhere) {
  ::testing::internal::CaptureStderr();
  std::atomic<bool> late_rank_failed{false};
  RunRanks(3, [&](int rank, Runtime& rt) {
    std::vector<float> v(4, 1);
    // Rank 2 is 1.5 s late with "late": past the 0.5 s stall shutdown time.
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Status s = AllreduceSync(rt, "late", v.data(), v.data(), 4, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << "rank " << rank << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("tensor 'late' waiting"));
    EXPECT_THAT(s.message(), HasSubstr(rank == 2 ? "missing ranks [0, 1]" : "missing ranks [2]"));
    // After the stall, the job goes on (once rank 2 saw its own failure too).
    if (rank == 2) late_rank_failed = true;
    while (!late_rank_failed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    SumStep(rt, "after", rank);
  }, [](RuntimeOptions& o) {
    o.stall_check = std::chrono::milliseconds(200);
    o.stall_shutdown = std::chrono::milliseconds(500);
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("dprun: stall: some ranks have submitted tensors that others have not"));
  EXPECT_THAT(log, HasSubstr("tensor 'late' waiting 0 s: submitted by ranks [0, 1], missing ranks [2]"));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
