// A run dir holds one line of history. When a run resumes from a checkpoint of its own run dir that
// is not the newest (a chosen earlier step, or the newest good one past damaged ones), what came
// after it — later checkpoints, a later model_best or model_final, their logs — is moved aside into
// RUN/abandoned/, so restarts, pruning and `--resume RUN` can only follow the line being trained.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// The step a checkpoint folder is named for (step_N); -1 for any other name.
int64_t checkpoint_step_of(const std::string& dir);

// The run dir's resumable checkpoints (RUN/checkpoints/step_N, complete ones only), newest first:
// those of its current line of history. While a move aside is pending (a run was stopped in the
// middle of one), the checkpoints it was moving are not among them.
std::vector<std::string> checkpoints_of_line(const std::string& run_dir);

// What set_aside_after moved (folder "" when nothing).
struct SetAside {
  std::string folder;               // RUN/abandoned/after_step_N.UTC
  std::vector<std::string> moved;   // names relative to the run dir
  // "checkpoints step_60..step_200 (15), model_best, model_final, summary.json"
  std::string describe() const;
};

// Called by the one writer of run_dir (rank 0) once the run has resumed from its checkpoint of
// `step`: moves every later checkpoint, a model_best or model_final written after `step` (with
// summary.json) and a copy of the logs as they stood into RUN/abandoned/after_step_N.UTC. The move
// is recorded first (RUN/abandoned/pending.json) and the record removed last, so a run killed in
// the middle is finished by the next start. Nothing is deleted.
SetAside set_aside_after(const std::string& run_dir, int64_t step);

}  // namespace dtrain
