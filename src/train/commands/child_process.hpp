// Running another program to its end with its output kept in a log file (`dtrain scale` and
// `dtrain sweep` run each point of a study this way), and finding the programs built beside dtrain.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// How a child program ended: its exit status (128 + the signal's number when a signal killed it, as
// a shell says it) and the same in words ("" when it exited 0, "exit status 1", "killed by signal 9").
struct ChildEnd {
  int status = 0;
  std::string how;
};

// Runs argv (argv[0] looked up on PATH when it holds no '/') with stdin from /dev/null and stdout
// and stderr into log_path (created, and emptied unless `append`), and waits for it. Error when the
// log cannot be written or the program cannot be started, naming it and `fix`.
ChildEnd run_logged_to_end(const std::vector<std::string>& argv, const std::string& log_path, const std::string& fix,
                           bool append = false);
// The same, returning only ChildEnd::how.
std::string run_logged(const std::vector<std::string>& argv, const std::string& log_path, const std::string& fix);

// The path of program `name` (dtrain, dtrun) in the folder of the running dtrain (/proc/self/exe's);
// Error when /proc cannot tell, naming `command` (e.g. "dtrain scale").
std::string program_beside_self(const std::string& name, const std::string& command);

}  // namespace dtrain
