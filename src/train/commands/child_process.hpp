// Running another program to its end with its output kept in a log file (`dtrain scale` runs each
// point of a study this way).
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// Runs argv (argv[0] looked up on PATH when it holds no '/') with stdin from /dev/null and stdout
// and stderr into log_path (created or emptied), and waits for it. Returns "" when it exits 0, else
// how it ended ("exit status 1", "killed by signal 9"). Error when the log cannot be written or the
// program cannot be started, naming it and `fix`.
std::string run_logged(const std::vector<std::string>& argv, const std::string& log_path, const std::string& fix);

}  // namespace dtrain
