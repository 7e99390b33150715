// The worker processes of one node: spawn with an environment, forward output (rank tags, log files),
// watch for exits, forward signals, stop them (SIGTERM, then SIGKILL after a grace period).
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
  std::vector<int> cpus;                   // its affinity mask (dtrun --bind cores); empty: dtrun's
};

// Which of a worker's streams an option takes (torchrun's --redirects/--tee: 0 none, 1 stdout,
// 2 stderr, 3 both), for every local rank, or per local rank ("0:3,1:2": the others none).
struct StreamChoice {
  int all = 0;
  std::map<int, int> per_local_rank;
  int for_local_rank(int local_rank) const;
  bool any() const;
};

// Where the workers' output goes.
struct OutputPlan {
  bool tag = true;                    // forwarded lines start with "[rank]: "
  std::vector<int> only_ranks;        // forward only these ranks' output (empty: all)
  std::vector<int> only_local_ranks;  // and only these local ranks' (empty: all)
  std::string log_dir;                // files DIR/attempt_N/rank_R/{stdout,stderr}.log for the streams below
  StreamChoice redirects;             // to the files only
  StreamChoice tee;                   // to the files and forwarded
  int attempt = 0;                    // N: the restart round
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
  WorkerGroup(const std::vector<std::string>& command, std::vector<WorkerSpec> specs, OutputPlan plan);
  ~WorkerGroup();  // kills what is still running

  // Forwards output and reaps exits for up to `ms` milliseconds; returns exits seen this call.
  std::vector<WorkerExit> poll(int ms);
  bool all_exited() const;
  size_t running() const;
  // SIGTERM to every running worker, SIGKILL to what is left after `grace_s`; forwards output.
  void stop(int grace_s);
  // `sig` to every running worker's process group (a signal forwarded to them, e.g. SIGUSR1).
  void send(int sig);
  // The last lines the worker of `rank` printed that did not go to dtrun's output tagged with its
  // rank (filtered out, redirected to a file, or untagged), for a failure report: "" when every
  // one of them was just shown.
  std::string tail(int rank) const;
  // Descriptors the group holds per worker for `plan` (pipes and log files).
  static int descriptors_per_worker(const OutputPlan& plan);

 private:
  struct Worker {
    WorkerSpec spec;
    pid_t pid = 0;
    int out = -1, err = -1;
    std::string out_buf, err_buf;
    std::deque<std::pair<std::string, bool>> last;  // (line, shown tagged)
    bool exited = false;
    int log[2] = {-1, -1};           // stdout, stderr log files
    bool console[2] = {true, true};  // forwarded to dtrun's stdout, stderr
  };
  void forward(Worker& w, int& fd, std::string& buf, bool flush_all);
  void emit(Worker& w, const std::string& line, bool is_err);
  void open_logs(Worker& w);
  void start(Worker& w, const std::vector<std::string>& command);
  void release();  // kills what runs, closes every descriptor

  std::vector<Worker> workers_;
  OutputPlan plan_;
  double start_;
};

}  // namespace dtrain
