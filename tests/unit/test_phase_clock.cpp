// The phase clock and the trace buffer (core): phases add up to the step, nested scopes return to
// the phase they left, eval and checkpoint keep what they run, a device timer's intervals are the
// ones used, spans are kept only while tracing is on.
#include <gtest/gtest.h>

#include <thread>

#include "core/phase_clock.hpp"
#include "core/trace.hpp"

using namespace dtrain;

namespace {

void busy_for(double seconds) {
  const double end = monotonic_seconds() + seconds;
  while (monotonic_seconds() < end) {
  }
}

double sum(const PhaseSeconds& p) {
  double s = 0.0;
  for (double v : p) s += v;
  return s;
}

// A device clock that says every interval took 1 ms more than its index, so its figures are known.
class FakeMarks final : public MarkTimer {
 public:
  size_t marks = 0;
  void mark(size_t i) override { marks = std::max(marks, i + 1); }
  void intervals(size_t n, double* out) override {
    for (size_t i = 0; i + 1 < n; ++i) out[i] = 1e-3 * double(i + 1);
  }
};

}  // namespace

TEST(PhaseClock, PhasesAddUpToTheStepAndScopesReturn) {
  PhaseClock clock;
  ASSERT_EQ(PhaseClock::current(), &clock);
  const double t0 = monotonic_seconds();
  {
    PhaseScope data(Phase::data);
    busy_for(0.01);
  }
  {
    PhaseScope fwd(Phase::forward);
    busy_for(0.01);
    {
      PhaseScope wait(Phase::comm);
      EXPECT_EQ(clock.phase(), Phase::comm);
      busy_for(0.005);
    }
    EXPECT_EQ(clock.phase(), Phase::forward);
  }
  EXPECT_EQ(clock.phase(), Phase::other);
  const PhaseSeconds p = clock.end_step();
  const double wall = monotonic_seconds() - t0;
  EXPECT_NEAR(sum(p), wall, 2e-3);  // from the clock's start to end_step, nothing lost
  EXPECT_GE(p[size_t(Phase::data)], 0.01);
  EXPECT_GE(p[size_t(Phase::forward)], 0.01);
  EXPECT_GE(p[size_t(Phase::comm)], 0.005);
  EXPECT_LT(p[size_t(Phase::forward)], 0.015 + 0.01);  // the comm wait was taken out of forward
  EXPECT_EQ(p[size_t(Phase::backward)], 0.0);
  // the next step starts where this one ended
  busy_for(0.002);
  const PhaseSeconds q = clock.end_step();
  EXPECT_GE(q[size_t(Phase::other)], 0.002);
  EXPECT_EQ(q[size_t(Phase::data)], 0.0);
}

TEST(PhaseClock, EvalAndCheckpointKeepWhatTheyRun) {
  PhaseClock clock;
  clock.end_step();
  {
    PhaseScope eval(Phase::eval);
    PhaseScope fwd(Phase::forward);  // the validation's forward passes and collectives stay eval
    PhaseScope wait(Phase::comm);
    EXPECT_EQ(clock.phase(), Phase::eval);
    busy_for(0.003);
  }
  EXPECT_EQ(clock.phase(), Phase::other);
  const PhaseSeconds p = clock.end_step();
  EXPECT_GE(p[size_t(Phase::eval)], 0.003);
  EXPECT_EQ(p[size_t(Phase::forward)], 0.0);
  EXPECT_EQ(p[size_t(Phase::comm)], 0.0);
  // the host intervals of the closed step, for a trace: eval among them, in order, without gaps
  const auto spans = clock.host_intervals();
  ASSERT_FALSE(spans.empty());
  bool eval = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    eval = eval || spans[i].phase == Phase::eval;
    if (i) {
      EXPECT_EQ(spans[i].start, spans[i - 1].end);
    }
  }
  EXPECT_TRUE(eval);
}

TEST(PhaseClock, ADeviceTimerMeasuresThePhases) {
  FakeMarks marks;
  PhaseClock clock(&marks);
  {
    PhaseScope fwd(Phase::forward);  // interval 0: other; 1: forward
  }
  {
    PhaseScope bwd(Phase::backward);  // 2: other; 3: backward
  }
  const PhaseSeconds p = clock.end_step();  // 4: other (to the end)
  EXPECT_EQ(marks.marks, 6u);
  EXPECT_NEAR(p[size_t(Phase::forward)], 2e-3, 1e-12);
  EXPECT_NEAR(p[size_t(Phase::backward)], 4e-3, 1e-12);
  EXPECT_NEAR(p[size_t(Phase::other)], 1e-3 + 3e-3 + 5e-3, 1e-12);
}

TEST(PhaseClock, OnlyTheBoundThreadIsTimed) {
  PhaseClock clock;
  std::thread other([] {
    EXPECT_EQ(PhaseClock::current(), nullptr);
    PhaseScope s(Phase::comm);  // a thread without a clock: nothing happens
  });
  other.join();
  EXPECT_EQ(clock.end_step()[size_t(Phase::comm)], 0.0);
}

TEST(Trace, SpansAreKeptOnlyWhileOn) {
  Trace::take();
  { TraceScope off("compute", "unit", " F"); }
  EXPECT_TRUE(Trace::take().empty());
  Trace::set_on(true);
  {
    TraceScope on("compute", "blocks.0", " B");
    on.set_args(R"({"micro": 1})");
    busy_for(0.001);
  }
  std::thread([] { TraceScope t("comm dp", "allreduce sum"); }).join();  // any thread records
  Trace::set_on(false);
  const std::vector<TraceSpan> spans = Trace::take();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "blocks.0 B");
  EXPECT_EQ(spans[0].track, "compute");
  EXPECT_EQ(spans[0].args, R"({"micro": 1})");
  EXPECT_GE(spans[0].end - spans[0].start, 0.001);
  EXPECT_EQ(spans[1].track, "comm dp");
  EXPECT_TRUE(Trace::take().empty());  // take() empties the buffer
}
