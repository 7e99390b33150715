// Pipeline schedules as data (DESIGN §3.8): per-rank lists of actions (F, B, I, W and the sends and
// receives of activations and gradients, each of one stage and micro-batch), made by generators for
// GPipe, 1F1B, interleaved 1F1B, ZB-H1 and ZB-V, or read from a file. validate() checks a list
// before anything runs; simulate() predicts its timeline and bubble; the engine runs any list.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// F: forward of a stage for a micro-batch; B: its whole backward; I: the input-gradient half of the
// backward, W: the weight-gradient half (zero-bubble schedules split B into I then W).
// SEND_F: send the stage's output to the next stage's rank; RECV_F: receive the stage's input from
// the previous stage's rank; SEND_B: send the stage's input gradient to the previous stage's rank;
// RECV_B: receive the stage's output gradient from the next stage's rank. Between two stages on the
// same rank nothing is sent: the engine hands the tensor over locally.
enum class Op : uint8_t { F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B };

struct Action {
  Op op = Op::F;
  int stage = 0;
  int micro = 0;
  bool operator==(const Action&) const = default;
};

// "0F1" (stage 0, F, micro-batch 1), "1SEND_F0", "2RECV_B3": PyTorch's way of writing actions.
std::string to_string(const Action& a);
const char* op_name(Op op);
// Parses to_string's form; throws Error naming the token otherwise.
Action parse_action(const std::string& token);

struct Schedule {
  std::string name;        // gpipe | 1f1b | interleaved-1f1b | zb-h1 | zb-v | a file's path
  int pp = 1;              // ranks
  int virtual_stages = 1;  // stages per rank
  int microbatches = 1;
  std::vector<int> stage_rank;              // [pp * virtual_stages]: the rank that holds each stage
  std::vector<std::vector<Action>> ranks;   // [pp]: each rank's actions in order

  int stages() const { return pp * virtual_stages; }
  // The stages a rank holds, in ascending order.
  std::vector<int> stages_of(int rank) const;
  // Whether the backward is split into I and W (any I action present).
  bool split_backward() const;
  // Activation slots each rank needs: the most micro-batches of any one stage of that rank that are
  // forwarded and not yet fully backwarded (B, or W when split) at any point of its list.
  std::vector<int> slots() const;
  // The most (stage, micro-batch) pairs of each rank in flight at once, its stages together. A stage
  // holds 1/virtual_stages of a rank's layers: divide by virtual_stages for whole-rank activations.
  std::vector<int> peak_in_flight() const;
};

// What a schedule may ask for (generated, or read from a file): far beyond any machine's pipeline,
// and small enough that making, checking and simulating it takes seconds and bounded memory.
inline constexpr int kMaxPipelineRanks = 1024;
inline constexpr int kMaxVirtualStages = 64;
inline constexpr int kMaxMicrobatches = 4096;
inline constexpr int64_t kMaxStageMicrobatches = int64_t(1) << 17;  // pp × virtual × micro-batches
// Error (naming `where`, the bound and the fix) unless the shape is within the bounds above.
void check_schedule_shape(int pp, int virtual_stages, int microbatches, const std::string& where);

// The schedule names the generators know.
const std::vector<std::string>& schedule_names();
// Makes the named schedule; throws Error (one line naming the problem and the fix) for an unknown
// name or a shape it does not support (e.g. interleaved-1f1b needs virtual ≥ 2, zb-v exactly 2,
// and micro-batches ≥ pp where the schedule needs it).
Schedule make_schedule(const std::string& name, int pp, int virtual_stages, int microbatches);

// Text form: a header line per key, then one line per rank:
//   schedule NAME / pp P / virtual V / microbatches M / stage_rank r0 r1 ... / rank R: 0F0 0SEND_F0 ...
// ('#' starts a comment). read_schedule throws Error naming the file, the line and the fix.
std::string write_schedule(const Schedule& s);
Schedule read_schedule(const std::string& path);

// Every problem found, one line each naming the rank, the action and what is wrong (empty: valid):
// each stage's micro-batches forwarded once, backwarded once (B, or I and W), on the stage's rank;
// F before B/I before W; a stage's input received (or produced locally) before its F, its output
// gradient before its B/I; every send matched by a receive on the right rank and vice versa; no
// deadlock when sends never block and receives wait (simulated); when max_slots ≥ 0, no rank needs
// more than max_slots activation slots. At most kMaxProblemsListed lines, then one that counts the rest.
inline constexpr size_t kMaxProblemsListed = 20;
std::vector<std::string> validate(const Schedule& s, int max_slots = -1);

// Relative durations of the actions (time units) and of a send between ranks; `stages`, when
// given, holds each stage's own (measured or given per stage) and overrides F, B, I and W.
struct StageCosts {
  double F = 1.0, B = 2.0, I = 1.0, W = 1.0;
};
struct ActionCosts {
  double F = 1.0, B = 2.0, I = 1.0, W = 1.0, comm = 0.0;
  std::vector<StageCosts> stages;  // by global stage; empty: the same for every stage
  double of(Op op, int stage) const;
};

struct TimedAction {
  Action action;
  double start = 0.0, end = 0.0;
};

struct Simulation {
  std::vector<std::vector<TimedAction>> ranks;  // compute actions only, in time order
  double makespan = 0.0;
  std::vector<double> bubble;  // per rank: idle share of the makespan
  double mean_bubble = 0.0;
};

// `dtrain plan --costs`: "F,B,I,W" or "F,B,I,W,COMM", or one F,B,I,W per stage joined by ';' (a
// run's summary.json pp_stage_ms; COMM from any group). Error naming the flaw otherwise.
ActionCosts parse_action_costs(const std::string& text);

// Runs the lists on an ideal machine (sends take costs.comm, receives wait for their send); the
// schedule must be valid.
Simulation simulate(const Schedule& s, const ActionCosts& costs = {});

// The textbook bubble of a named schedule as an idle share of the step (DESIGN §5): gpipe and 1f1b
// (p−1)/(m+p−1), interleaved (p−1)/(v·m+p−1), zb-h1 (p−1)/(3m+p−1) (about a third of 1F1B's when
// F = I = W), zb-v (p−1)/(6m+p−1) (only the first forward's way down the V: about 0); -1 when the
// name has no formula (a file).
double theoretical_bubble(const std::string& name, int pp, int virtual_stages, int microbatches);

// The time × rank grid of a simulation (one column per time unit, each cell the action running,
// e.g. "F3" or "b1"), then the simulated and theoretical bubble and each rank's activation slots.
std::string render_grid(const Schedule& s, const Simulation& sim);

}  // namespace dtrain
