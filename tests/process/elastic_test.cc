// Elastic jobs (dprun --min-np, hvd.elastic): examples/elastic/train_elastic.py trains
// a small model while ranks die or join. Each job's command line carries its own
// temporary directory, which tells its processes from other tests'. Each worker logs the samples of every
// committed batch and its final parameters (ELASTIC_LOG), which the tests read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/job_runner.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using hvd::testing::JobRunner;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kScript = std::string(HVD_SOURCE_DIR) + "/examples/elastic/train_elastic.py";

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/hvd-elastic-XXXXXX";
    path = mkdtemp(t) ? t : "";
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
};

struct WorkerLog {
  double start_loss = -1, final_loss = -1;
  std::string start_rank, host;  // HOROVOD_RANK and HOROVOD_HOSTNAME as it started
  std::string checksum;  // empty: no "final" line
  int final_size = 0;
  std::map<int, std::vector<int>> samples;  // epoch -> indices, in order
};

WorkerLog ReadLog(const std::string& file) {
  WorkerLog w;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string word;
    s >> word;
    if (word == "start") {
      s >> word >> w.start_loss >> word >> w.start_rank >> word >> w.host;
    } else if (word == "final") {
      s >> w.checksum >> word >> w.final_loss >> word >> w.final_size;
    } else if (word == "epoch") {
      int epoch = 0;
      std::string indices;
      s >> epoch >> word >> word >> word >> word >> word >> indices;
      std::stringstream list(indices);
      std::string i;
      while (std::getline(list, i, ',')) w.samples[epoch].push_back(std::stoi(i));
    }
  }
  return w;
}

std::map<std::string, WorkerLog> ReadLogs(const std::string& dir, int workers) {
  std::map<std::string, WorkerLog> logs;
  for (int i = 0; i < workers; ++i) {
    const std::string id = "w" + std::to_string(i);
    logs[id] = ReadLog(dir + "/" + id + ".log");
  }
  return logs;
}

JobRunner::Options Env(const std::string& log_dir, std::vector<std::string> more) {
  JobRunner::Options o;
  o.merge_output = true;
  o.env = {"ELASTIC_LOG=" + log_dir, "PYTHONPATH=" + std::string(HVD_SOURCE_DIR) + "/bindings/python",
           "HVD_LIBRARY=" + std::string(HVD_BUILD_DIR) + "/libhvd.so", "HVD_TIMEOUT=20",
           "OMP_NUM_THREADS=1"};
  for (auto& e : more) o.env.push_back(std::move(e));
  return o;
}

// Every sample of every epoch, counted over all workers' committed batches.
void ExpectEverySampleOnce(const std::map<std::string, WorkerLog>& logs, int epochs, int samples) {
  for (int e = 0; e < epochs; ++e) {
    std::map<int, int> seen;
    for (const auto& [id, w] : logs) {
      auto it = w.samples.find(e);
      if (it == w.samples.end()) continue;
      for (int i : it->second) ++seen[i];
    }
    EXPECT_EQ(static_cast<int>(seen.size()), samples) << "epoch " << e;
    int repeated = 0;
    for (const auto& [i, n] : seen) repeated += n > 1;
    EXPECT_EQ(repeated, 0) << "epoch " << e;
  }
}

// Workers `ids` finished training, on `size` ranks, with the same parameters.
void ExpectFinishedAlike(const std::map<std::string, WorkerLog>& logs,
                         const std::vector<std::string>& ids, int size, const std::string& out) {
  for (const std::string& id : ids) {
    const WorkerLog& w = logs.at(id);
    EXPECT_FALSE(w.checksum.empty()) << id << " did not finish\n" << out;
    EXPECT_EQ(w.checksum, logs.at(ids[0]).checksum) << id << ": the parameters differ";
    EXPECT_EQ(w.final_size, size) << id;
  }
}

// Writes a discovery script printing localhost:2, and 127.0.0.1:2 while the file
// `dir`/`flag` exists (`second_while_flag`) or until it does (otherwise).
std::string DiscoveryScript(const std::string& dir, const std::string& flag,
                            bool second_while_flag) {
  const std::string script = dir + "/hosts.sh";
  std::ofstream(script) << "#!/bin/sh\necho localhost:2\n[ -e " << dir << "/" << flag << " ] "
                        << (second_while_flag ? "&&" : "||") << " echo 127.0.0.1:2\nexit 0\n";
  chmod(script.c_str(), 0755);
  return script;
}

// Lets the job train its first epoch, then creates `dir`/`flag` and waits for the end.
void FlagAfterFirstEpoch(JobRunner& job, const std::string& dir, const std::string& flag) {
  ASSERT_TRUE(job.ReadUntil([&] { return job.out().find("epoch 0: loss") != std::string::npos; },
                            std::chrono::seconds(120)))
      << job.out();
  std::ofstream(dir + "/" + flag) << "1";
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << job.out();
}

TEST(Elastic, AKilledRankLeavesTheJobTrainingOnTheRest) {
  TempDir dir;
  // w2 dies right after committing batch 5 of epoch 0: 6 x 8 x 4 samples are done, and
  // the 768 left split evenly over 3 ranks, so every sample runs exactly once.
  JobRunner job({kDprun, "-np", "4", "--min-np", "2", "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_KILL=w2:0:5"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("was killed by signal 9 (Killed); the job goes on with 3 rank(s)"));
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 3 rank(s)"));
  const auto logs = ReadLogs(dir.path, 4);
  EXPECT_TRUE(logs.at("w2").checksum.empty());
  ExpectFinishedAlike(logs, {"w0", "w1", "w3"}, 3, job.out());
  for (const char* id : {"w0", "w1", "w3"})
    EXPECT_LT(logs.at(id).final_loss, 0.6 * logs.at(id).start_loss) << id;
  ExpectEverySampleOnce(logs, 3, 960);
}

// A worker whose script raises shuts its runtime down before its process exits: the
// others' collectives fail first and they ask dprun for a new generation. dprun
// waits for the exit, so one generation follows (without the failed worker), not
// one with it and then another.
TEST(Elastic, AnExceptionInOneWorkerCostsOneReset) {
  TempDir dir;
  JobRunner job({kDprun, "-np", "4", "--min-np", "2", "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_RAISE=w2:0:5"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("ELASTIC_RAISE: worker w2 fails at w2:0:5"));
  EXPECT_THAT(job.out(), HasSubstr("exited with code 1; the job goes on with 3 rank(s)"));
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 3 rank(s)"));
  EXPECT_THAT(job.out(), Not(HasSubstr("dprun: generation 2")));
  EXPECT_THAT(job.out(), Not(HasSubstr("asked for a new generation")));
  const auto logs = ReadLogs(dir.path, 4);
  ExpectFinishedAlike(logs, {"w0", "w1", "w3"}, 3, job.out());
  ExpectEverySampleOnce(logs, 3, 960);
}

// A worker whose runtime fails while every process lives (here it shuts its runtime
// down; a timeout does the same): the workers reset and ask dprun for a new
// generation, which it publishes with all of them once the request has waited for
// an exit that does not come.
TEST(Elastic, WorkersWhoseRuntimeFailedWithNobodyDeadAskForANewGeneration) {
  TempDir dir;
  JobRunner job({kDprun, "-np", "3", "--min-np", "2", "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_SHUTDOWN=w1:0:5"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: a rank asked for a new generation"));
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 3 rank(s)"));
  EXPECT_THAT(job.out(), Not(HasSubstr("dprun: generation 2")));
  const auto logs = ReadLogs(dir.path, 3);
  ExpectFinishedAlike(logs, {"w0", "w1", "w2"}, 3, job.out());
  ExpectEverySampleOnce(logs, 3, 960);
}

TEST(Elastic, ARankLostDuringTheResetIsSurvivedToo) {
  TempDir dir;
  // w2 dies at batch 5; w3 dies as it rejoins (in its reset callback): a third
  // generation of 2 finishes.
  JobRunner job({kDprun, "-np", "4", "--min-np", "2", "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_KILL=w2:0:5", "ELASTIC_KILL_ON_RESET=w3"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  const auto logs = ReadLogs(dir.path, 4);
  ASSERT_FALSE(logs.at("w0").checksum.empty()) << job.out();
  EXPECT_EQ(logs.at("w0").checksum, logs.at("w1").checksum);
  EXPECT_EQ(logs.at("w0").final_size, 2);
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 2: 2 rank(s)"));
}

TEST(Elastic, FewerThanMinNpEndsTheJobNamingTheCause) {
  TempDir dir;
  JobRunner job({kDprun, "-np", "2", "--min-np", "2", "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_KILL=w1:0:3"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(120))) << job.out();
  EXPECT_EQ(job.exit_code(), 128 + SIGKILL) << job.out();
  EXPECT_TRUE(std::string(job.out()).find("dprun: rank 1 (pid ") != std::string::npos) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("was killed by signal 9 (Killed); 1 rank(s) left, fewer than "
                                   "--min-np 2"));
  EXPECT_TRUE(hvd::testing::ProcessesWithCommandLineContaining(dir.path).empty());
}

TEST(Elastic, ResetsAreBounded) {
  TempDir dir;
  JobRunner job({kDprun, "-np", "4", "--min-np", "2", "--reset-limit", "1", "/usr/bin/python3",
                 kScript, dir.path},
                Env(dir.path, {"ELASTIC_KILL=w2:0:5", "ELASTIC_KILL_ON_RESET=w3"}));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(120))) << job.out();
  EXPECT_NE(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("the job was reset 1 time(s) (--reset-limit 1)"));
  EXPECT_TRUE(hvd::testing::ProcessesWithCommandLineContaining(dir.path).empty());
}

// As horovodrun's --reset-limit, the limit bounds every reset, also one that host
// discovery causes: the job ends instead, naming the limit, and nothing starts.
TEST(Elastic, ADiscoveredChangeCountsTowardsTheResetLimit) {
  TempDir dir;
  const std::string script = DiscoveryScript(dir.path, "grow", /*second_while_flag=*/true);
  JobRunner job({kDprun, "-np", "2", "--min-np", "2", "--max-np", "4", "--reset-limit", "0",
                 "--host-discovery-script", script, "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_STEP_SLEEP=0.02"}));
  FlagAfterFirstEpoch(job, dir.path, "grow");
  EXPECT_EQ(job.exit_code(), 1) << job.out();
  EXPECT_THAT(job.out(),
              HasSubstr("dprun: the hosts changed, but the job was reset 0 time(s) (--reset-limit 0)"));
  EXPECT_THAT(job.out(), Not(HasSubstr("generation 1")));
  EXPECT_THAT(job.out(), Not(HasSubstr("[2]<")));  // no third worker
  EXPECT_TRUE(hvd::testing::ProcessesWithCommandLineContaining(dir.path).empty());
}

TEST(Elastic, ADiscoveredHostGrowsTheJobAndTheNewRanksGetTheState) {
  TempDir dir;
  const std::string script = DiscoveryScript(dir.path, "grow", /*second_while_flag=*/true);
  JobRunner job({kDprun, "-np", "2", "--min-np", "2", "--max-np", "4", "--host-discovery-script",
                 script, "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_STEP_SLEEP=0.02"}));
  FlagAfterFirstEpoch(job, dir.path, "grow");
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 4 rank(s)"));
  EXPECT_THAT(job.out(), HasSubstr("on 4 rank(s)"));
  const auto logs = ReadLogs(dir.path, 4);
  ExpectFinishedAlike(logs, {"w0", "w1", "w2", "w3"}, 4, job.out());
  // horovodrun's variables: the new workers start with their places in generation 1.
  EXPECT_EQ(logs.at("w1").start_rank, "1");
  EXPECT_EQ(logs.at("w1").host, "localhost");
  EXPECT_EQ(logs.at("w2").start_rank, "2");
  EXPECT_EQ(logs.at("w3").start_rank, "3");
  EXPECT_EQ(logs.at("w3").host, "127.0.0.1");
}

// Once a worker has finished training the job is finishing: discovery does not fill
// the slots freed by the workers that exited first (a new worker would wait in
// hvd_init for ranks that are gone and fail the job). w1 lingers 3 s after training,
// long enough for discovery (every second) to see free slots.
TEST(Elastic, NoWorkerStartsOnceTheFirstHasFinished) {
  TempDir dir;
  const std::string script = DiscoveryScript(dir.path, "grow", /*second_while_flag=*/true);
  JobRunner job({kDprun, "-np", "2", "--min-np", "2", "--max-np", "4", "--host-discovery-script",
                 script, "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_STEP_SLEEP=0.02", "ELASTIC_FINAL_SLEEP=w1:3"}));
  FlagAfterFirstEpoch(job, dir.path, "grow");
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 4 rank(s)"));
  EXPECT_THAT(job.out(), Not(HasSubstr("dprun: generation 2")));
  EXPECT_THAT(job.out(), Not(HasSubstr("[4]<")));     // no fifth worker's output
  EXPECT_THAT(job.out(), Not(HasSubstr("rank 4 (pid")));  // nor its exit
  for (const auto& [id, w] : ReadLogs(dir.path, 4)) EXPECT_FALSE(w.checksum.empty()) << id;
}

TEST(Elastic, AVanishedHostsRanksAreStoppedAndTheRestGoOn) {
  TempDir dir;
  const std::string script = DiscoveryScript(dir.path, "shrink", /*second_while_flag=*/false);
  JobRunner job({kDprun, "-np", "4", "-H", "localhost:2,127.0.0.1:2", "--min-np", "2",
                 "--host-discovery-script", script, "/usr/bin/python3", kScript, dir.path},
                Env(dir.path, {"ELASTIC_STEP_SLEEP=0.02"}));
  FlagAfterFirstEpoch(job, dir.path, "shrink");
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: host 127.0.0.1 is gone: stopping rank 2"));
  EXPECT_THAT(job.out(), HasSubstr("on 2 rank(s)"));
  const auto logs = ReadLogs(dir.path, 4);
  ASSERT_FALSE(logs.at("w0").checksum.empty()) << job.out();
  EXPECT_EQ(logs.at("w0").checksum, logs.at("w1").checksum);
  EXPECT_EQ(logs.at("w0").final_size, 2);
  EXPECT_TRUE(logs.at("w2").checksum.empty());
}

}  // namespace
