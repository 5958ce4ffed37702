// JobState: only legal transitions, generation bumps per restart, a whole-job restart budget,
// and deterministic start-up failures that fail at once.
#include "coordinator/state/job_state.h"

#include <set>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr JobPhase kAll[] = {JobPhase::kPending,    JobPhase::kRendezvous, JobPhase::kRunning,
                             JobPhase::kRestarting, JobPhase::kSucceeded,  JobPhase::kFailed,
                             JobPhase::kCancelled};

Failure Exited(std::string detail = "rank 1 on node-b exited with code 1") {
  return Failure{FailureKind::kRankExited, std::move(detail)};
}

// A job brought to Running by the legal path.
JobState RunningJob(int max_restarts) {
  JobState job("job-000001", max_restarts);
  EXPECT_TRUE(job.BeginRendezvous().ok());
  EXPECT_TRUE(job.StartRunning().ok());
  return job;
}

TEST(JobStateTest, HappyPath) {
  JobState job("job-000001", 3);
  EXPECT_EQ(job.phase(), JobPhase::kPending);
  EXPECT_EQ(job.generation(), 0);
  ASSERT_TRUE(job.BeginRendezvous().ok());
  EXPECT_EQ(job.phase(), JobPhase::kRendezvous);
  ASSERT_TRUE(job.StartRunning().ok());
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
  ASSERT_TRUE(job.Succeed().ok());
  EXPECT_EQ(job.phase(), JobPhase::kSucceeded);
  EXPECT_EQ(job.generation(), 0);
  EXPECT_EQ(job.restarts(), 0);
}

TEST(JobStateTest, TransitionTableIsExactlyTheDesignedOne) {
  const std::set<std::pair<JobPhase, JobPhase>> legal = {
      {JobPhase::kPending, JobPhase::kRendezvous},    {JobPhase::kPending, JobPhase::kFailed},
      {JobPhase::kPending, JobPhase::kCancelled},     {JobPhase::kRendezvous, JobPhase::kRunning},
      {JobPhase::kRendezvous, JobPhase::kFailed},     {JobPhase::kRendezvous, JobPhase::kCancelled},
      {JobPhase::kRunning, JobPhase::kRestarting},    {JobPhase::kRunning, JobPhase::kSucceeded},
      {JobPhase::kRunning, JobPhase::kFailed},        {JobPhase::kRunning, JobPhase::kCancelled},
      {JobPhase::kRestarting, JobPhase::kRendezvous}, {JobPhase::kRestarting, JobPhase::kFailed},
      {JobPhase::kRestarting, JobPhase::kCancelled},
  };
  for (JobPhase from : kAll) {
    for (JobPhase to : kAll) {
      EXPECT_EQ(IsLegalTransition(from, to), legal.count({from, to}) == 1)
          << JobPhaseName(from) << " -> " << JobPhaseName(to);
    }
  }
}

TEST(JobStateTest, IllegalTransitionNamesJobFromAndTo) {
  JobState job("job-000007", 3);
  absl::Status st = job.StartRunning();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("job-000007"), HasSubstr("Pending -> Running")));
  EXPECT_EQ(job.phase(), JobPhase::kPending);

  EXPECT_EQ(job.Succeed().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobStateTest, TerminalPhasesAreFinal) {
  JobState job = RunningJob(3);
  ASSERT_TRUE(job.Succeed().ok());
  absl::Status st = job.Cancel("user");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("Succeeded -> Cancelled"));
  EXPECT_EQ(job.Fail({FailureKind::kHung, "x"}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.BeginRendezvous().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.phase(), JobPhase::kSucceeded);
}

TEST(JobStateTest, CancelAndFailRecordWhy) {
  JobState a("a", 3);
  ASSERT_TRUE(a.Cancel("user asked").ok());
  EXPECT_EQ(a.phase(), JobPhase::kCancelled);
  EXPECT_THAT(a.error(), HasSubstr("user asked"));

  JobState b("b", 3);
  ASSERT_TRUE(b.BeginRendezvous().ok());
  ASSERT_TRUE(b.Fail({FailureKind::kRendezvousTimeout, "1 of 2 nodes joined"}).ok());
  EXPECT_EQ(b.phase(), JobPhase::kFailed);
  EXPECT_EQ(b.snapshot().last_failure, FailureKind::kRendezvousTimeout);
  EXPECT_THAT(b.error(), AllOf(HasSubstr("rendezvous_timeout"), HasSubstr("1 of 2")));
  EXPECT_EQ(b.restarts(), 0);  // Fail spends no restart
}

TEST(JobStateTest, RestartBumpsGenerationAndCountsTheRestart) {
  JobState job = RunningJob(3);
  absl::StatusOr<FailureOutcome> out = job.ReportFailure(0, Exited());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, FailureOutcome::kRestarting);
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  EXPECT_EQ(job.generation(), 1);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.snapshot().last_failure, FailureKind::kRankExited);
  EXPECT_THAT(job.error(), AllOf(HasSubstr("restart 1 of 3"), HasSubstr("node-b")));

  // The other ranks of generation 0 report the same incident: ignored, nothing counted twice.
  out = job.ReportFailure(0, Exited("rank 0 on node-a: connection reset"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kIgnored);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.generation(), 1);

  ASSERT_TRUE(job.BeginRendezvous().ok());
  ASSERT_TRUE(job.StartRunning().ok());
  out = job.ReportFailure(1, {FailureKind::kNodeLost, "node-c"});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kRestarting);
  EXPECT_EQ(job.generation(), 2);
  EXPECT_EQ(job.restarts(), 2);
}

TEST(JobStateTest, RestartBudgetIsForTheWholeJob) {
  JobState job = RunningJob(2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<FailureOutcome> out = job.ReportFailure(job.generation(), Exited());
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(*out, FailureOutcome::kRestarting);
    ASSERT_TRUE(job.BeginRendezvous().ok());
    ASSERT_TRUE(job.StartRunning().ok());
  }
  absl::StatusOr<FailureOutcome> out =
      job.ReportFailure(2, {FailureKind::kHung, "no progress for 300s"});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kFailed);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
  EXPECT_EQ(job.restarts(), 2);
  EXPECT_EQ(job.generation(), 2);
  EXPECT_THAT(job.error(), AllOf(HasSubstr("restart limit reached"), HasSubstr("max_restarts: 2"),
                                 HasSubstr("no progress for 300s")));
  // Late reports after the end change nothing.
  out = job.ReportFailure(2, Exited());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kIgnored);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
}

TEST(JobStateTest, ZeroRestartsFailsOnFirstFailure) {
  JobState job = RunningJob(0);
  absl::StatusOr<FailureOutcome> out = job.ReportFailure(0, Exited());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kFailed);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
}

TEST(JobStateTest, DeterministicStartupFailureFailsAtOnce) {
  JobState job = RunningJob(3);
  absl::StatusOr<FailureOutcome> out = job.ReportFailure(
      0, {FailureKind::kDeterministicStartup, "data/train.tsv: No such file or directory"});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kFailed);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.generation(), 0);
  EXPECT_EQ(job.snapshot().last_failure, FailureKind::kDeterministicStartup);
  EXPECT_THAT(job.error(), AllOf(HasSubstr("train.tsv"), HasSubstr("not restarted")));
}

TEST(JobStateTest, BadReportsAreErrors) {
  JobState job = RunningJob(3);
  EXPECT_EQ(job.ReportFailure(1, Exited()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.ReportFailure(0, {FailureKind::kNone, "?"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);

  JobState waiting("w", 3);
  ASSERT_TRUE(waiting.BeginRendezvous().ok());
  absl::StatusOr<FailureOutcome> out = waiting.ReportFailure(0, Exited());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("Rendezvous"));
}

TEST(JobStateTest, RestoredSnapshotKeepsCountingFromWhereItWas) {
  JobStateSnapshot s;
  s.phase = JobPhase::kRunning;
  s.generation = 2;
  s.restarts = 2;
  JobState job("job-000003", 3, s);
  absl::StatusOr<FailureOutcome> out = job.ReportFailure(2, Exited());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kRestarting);
  EXPECT_EQ(job.generation(), 3);
  ASSERT_TRUE(job.BeginRendezvous().ok());
  ASSERT_TRUE(job.StartRunning().ok());
  out = job.ReportFailure(3, Exited());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, FailureOutcome::kFailed);
}

TEST(JobStateTest, NamesRoundTrip) {
  for (JobPhase p : kAll) {
    absl::StatusOr<JobPhase> back = ParseJobPhase(JobPhaseName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(ParseJobPhase("running").status().code(), absl::StatusCode::kInvalidArgument);
  for (FailureKind k : {FailureKind::kNone, FailureKind::kRankExited, FailureKind::kNodeLost,
                        FailureKind::kHung, FailureKind::kDeterministicStartup,
                        FailureKind::kRendezvousTimeout, FailureKind::kPlanning}) {
    absl::StatusOr<FailureKind> back = ParseFailureKind(FailureKindName(k));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(ParseFailureKind("oom").ok());
}

}  // namespace
}  // namespace ringmaster::coordinator
