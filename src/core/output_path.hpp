// Where dtrain may put an output: never over what it did not make, never inside a checkpoint or a run
// dir (whose files their own writers keep consistent), never into a run dir that a job holds.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace dtrain {

// Recognises a folder as an earlier output of the same command, which may then be replaced.
using MadeBy = std::function<bool(const std::string& dir)>;

// A MadeBy for folders that hold nothing but these paths (relative to the folder, glob patterns
// as fnmatch: "vocab.txt", "*.bin", "nproc_*" where `*` also matches a '/'). Temporaries that an
// interrupted write leaves ("*.tmp.*") always count as the command's own.
MadeBy holds_only(std::vector<std::string> patterns);

// Checks that DIR may become the output folder of COMMAND (e.g. "dtrain ckpt import"): it is absent,
// empty, or what `made_by` recognises; it is not inside a checkpoint or a run dir; and it is not a
// run dir (a job's run.lock named). Errors are one line naming what is there and saying to choose
// another --out.
void check_output_folder(const std::string& dir, const std::string& command, const MadeBy& made_by);

// Checks that an output FILE is not inside a checkpoint or a run dir (where it would replace or sit
// among the files their writers keep), except the file names a run dir may hold beside its own
// (`allowed_in_run_dir`: e.g. "report.html" for dtrain report). `option` names the flag in the error.
void check_output_file(const std::string& file, const std::string& option,
                       const std::vector<std::string>& allowed_in_run_dir = {});

// The checkpoint or run dir that PATH is inside (or is), "" if none; `what` becomes "checkpoint" or
// "run dir".
std::string enclosing_checkpoint_or_run(const std::string& path, std::string* what);

}  // namespace dtrain
