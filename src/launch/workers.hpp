// The worker processes of one node: spawn with an environment, forward output line by line with
// a rank tag, watch for exits, stop them (SIGTERM, then SIGKILL after a grace period).
#pragma once
#include <sys/types.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

namespace dtrain {

struct WorkerSpec {
  int rank = 0, local_rank = 0;
  std::map<std::string, std::string> env;  // added to dtrun's own environment
};

struct WorkerExit {
  int rank = -1, local_rank = -1;
  pid_t pid = 0;
  int status = 0;           // waitpid status
  double seconds = 0.0;     // after start
  std::string describe() const;  // "exited with status 3" / "was killed by signal 9 (Killed)"
  bool ok() const;
};

// Why execvp could not run `program` (a path with a slash must be an executable file; a bare name
// must be one in a PATH folder), e.g. "not found (not a file on PATH)"; "" when it can.
std::string program_problem(const std::string& program);

class WorkerGroup {
 public:
  // Starts the workers. Each gets SIGKILL when the thread that created the group ends (Linux's
  // parent-death signal), so create it on a thread that lives as long as the agent: the main one.
  WorkerGroup(const std::vector<std::string>& command, std::vector<WorkerSpec> specs, bool tag_output,
              std::vector<int> only_ranks);
  ~WorkerGroup();  // kills what is still running

  // Forwards output and reaps exits for up to `ms` milliseconds; returns exits seen this call.
  std::vector<WorkerExit> poll(int ms);
  bool all_exited() const;
  size_t running() const;
  // SIGTERM to every running worker, SIGKILL to what is left after `grace_s`; forwards output.
  void stop(int grace_s);
  // Last lines the worker of `rank` printed (for failure reports).
  std::string tail(int rank) const;
  // Whether that worker's lines went to dtrun's output tagged with its rank: then a failure report
  // need not repeat them.
  bool shown_tagged(int rank) const;

 private:
  struct Worker {
    WorkerSpec spec;
    pid_t pid = 0;
    int out = -1, err = -1;
    std::string out_buf, err_buf;
    std::deque<std::string> last;
    bool exited = false;
  };
  void forward(Worker& w, int& fd, std::string& buf, bool flush_all);
  void emit(Worker& w, const std::string& line, bool is_err);
  bool forwarded(const WorkerSpec& s) const;  // its output goes to dtrun's

  std::vector<Worker> workers_;
  bool tag_;
  std::vector<int> only_;
  double start_;
};

}  // namespace dtrain
