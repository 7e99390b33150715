// dtrun option parsing (see options.hpp): every option in both spellings (--opt VALUE and
// --opt=VALUE, dashes or underscores), every number range-checked where it is read.
#include "launch/options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "comm/socket.hpp"
#include "core/error.hpp"
#include "core/whole_number.hpp"
#include "launch/host_counts.hpp"

namespace dtrain {

const char* kLaunchUsage = R"(dtrun — start a dtrain job's workers on this node

usage: dtrun [options] PROGRAM [ARGS...]
A value follows its option, or an '=' (--rdzv-id job, --rdzv_id=job: dashes and underscores
alike). torchrun's options are taken where they mean something for dtrun; the others are refused.

Workers and nodes
  --nproc-per-node N|cpu|gpu|auto  workers on this node: N; cpu: one per CPU this process may
                            use; gpu: one per visible NVIDIA GPU (CUDA_VISIBLE_DEVICES
                            counts); auto: gpu when there is one, else cpu                [1]
  --nnodes N|MIN:MAX        nodes in the job, or an elastic range: the job runs on as many
                            as are there (up to MAX), goes on with the rest when one is
                            lost (at least MIN; each loss takes one of --max-restarts) and
                            takes a node that comes back in after its next checkpoint  [1]
  --node-rank R             this node's rank (default: SLURM_NODEID, or 0 on one node);
                            an elastic job numbers its nodes itself, in this order
Rendezvous (dtrun's own TCP store, hosted by node rank 0)
  --rdzv-endpoint HOST:PORT where the nodes meet                               [127.0.0.1:29500]
                            node rank 0 hosts the store there and listens on HOST's address
                            (127.0.0.1: reachable from this machine only), or on all addresses
                            when HOST is not this machine's or, with --nnodes > 1, is a name
                            that resolves here to loopback (/etc/hosts' "127.0.1.1 HOSTNAME")
  --master-addr HOST, --master-port PORT   the endpoint, given torchrun's static way
  --rdzv-id ID              the job's name at the endpoint (e.g. $SLURM_JOB_ID)  [none]
  --rdzv-backend c10d|static   either: both mean dtrun's rendezvous (nodes still need
                            --node-rank or SLURM_NODEID)                        [c10d]
  --rdzv-conf K=V[,K=V...]  join_timeout=S or timeout=S (as --rdzv-timeout), read_timeout=S
                            (each store operation), is_host=true|false (host the store on
                            this node instead of node rank 0; an elastic job without node
                            ranks: the node whose address the endpoint names); elastic jobs:
                            last_call_timeout=S (with MIN nodes in, wait this long for more
                            [30]), keep_alive_interval=S [5] and keep_alive_max_attempt=N [3]
                            (a node that misses N heartbeats S apart is lost); close_timeout,
                            heartbeat, use_libuv and store_type are accepted and ignored (with
                            a note); other keys are refused
  --standalone              one node, a free port on 127.0.0.1 and a fresh job token
  --rdzv-timeout S          seconds nodes wait for each other                    [300]
Running
  --max-restarts K          restart all workers up to K times after a failure    [0]
  --monitor-interval S      seconds between checks of the workers (decimals)     [0.1]
  --stop-timeout S          seconds between SIGTERM and SIGKILL when stopping    [5]
  --save-timeout S          after SIGUSR1 or SIGTERM (forwarded to the workers, which save a
                            checkpoint and exit 79), how long they may take; then stopped  [600]
  --bind none|cores         cores: pin each worker to its own equal share of the CPUs dtrun
                            may use (worker L gets the L-th share of its affinity mask)  [none]
  --role NAME               the workers' ROLE_NAME                               [default]
  --start-method spawn|fork|forkserver, --no-python
                            accepted; dtrun always starts PROGRAM with fork and exec
Output
  --log-level quiet|info|debug  what dtrun prints (else DTRAIN_LOG_LEVEL): quiet: errors, warnings
                            and the outcome of a non-zero exit; info: also its progress; debug:
                            also the rendezvous steps, each worker's command and environment
                            (the job token hidden) and each worker's exit. The workers get it
                            as DTRAIN_LOG_LEVEL                                  [info]
  --no-tag                  do not prefix worker output with "[rank]:"
  --only-ranks R[,R...]     forward only these ranks' output
  --local-ranks-filter L[,L...]  forward only these local ranks' output
  --log-dir DIR             where --redirects and --tee write:
                            DIR/attempt_N/rank_R/stdout.log and stderr.log (N: the restart)
  --redirects, -r S         streams written to the log files instead of forwarded: 0 none,
                            1 stdout, 2 stderr, 3 both, or per local rank (0:3,1:2)  [0]
  --tee, -t S               streams written to the log files and forwarded (as --redirects)
Signals: SIGUSR1 and SIGTERM (SLURM's warning before the time limit, preemption) are forwarded to
the workers, which save a checkpoint and exit 79; dtrun waits for them (--save-timeout), does not
restart them and exits 79 (requeue the job). SIGINT and SIGHUP stop the workers at once (exit
128 + the signal).
Refused: -m/--module and --run-path (dtrun runs a program: give its path), --local-addr (set
DTRAIN_SOCKET_IFNAME), --rdzv-backend etcd.

Workers get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_NAME, ROLE_RANK,
ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DTRAIN_JOB_TOKEN (from the environment, else generated)
and DTRAIN_RESTART_COUNT (elastic jobs: DTRAIN_ELASTIC=MIN:MAX, DTRAIN_NODES and, after a
change of nodes, DTRAIN_MEMBERSHIP); OMP_NUM_THREADS defaults to the CPUs dtrun may use (affinity mask and
cgroup quota) / workers, OMP_WAIT_POLICY to PASSIVE (threads sleep between parallel regions).
)";

namespace {

constexpr int kMaxWorkers = 4096;  // per node
constexpr int kMaxNodes = 65536;
constexpr int kWeek = 7 * 24 * 3600;  // seconds

// The value of an option (or variable) `opt`: a whole number from lo to hi, else one line naming both.
int to_int(const std::string& opt, const std::string& v, int lo, int hi) {
  const auto x = parse_whole(v, lo, hi);
  require(x.has_value(), opt + " '" + v + "' is not a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ": see `dtrun --help`");
  return int(*x);
}

std::vector<std::string> split(const std::string& v, char sep) {
  std::vector<std::string> out;
  size_t k = 0;
  for (;;) {
    const size_t c = v.find(sep, k);
    out.push_back(v.substr(k, c == std::string::npos ? std::string::npos : c - k));
    if (c == std::string::npos) return out;
    k = c + 1;
  }
}

std::vector<int> int_list(const std::string& opt, const std::string& v, int hi) {
  std::vector<int> out;
  for (const auto& item : split(v, ',')) out.push_back(to_int(opt, item, 0, hi));
  return out;
}

// torchrun's --redirects/--tee: "3", or "LOCAL_RANK:S,…".
StreamChoice streams(const std::string& opt, const std::string& v) {
  StreamChoice c;
  if (v.find(':') == std::string::npos) {
    c.all = to_int(opt, v, 0, 3);
    return c;
  }
  for (const auto& item : split(v, ',')) {
    const auto colon = item.find(':');
    require(colon != std::string::npos,
            opt + " '" + v + "' mixes one value with LOCAL_RANK:S pairs: give 3, or e.g. 0:3,1:2");
    const int lr = to_int(opt + " local rank", item.substr(0, colon), 0, kMaxWorkers - 1);
    c.per_local_rank[lr] = to_int(opt + " streams", item.substr(colon + 1), 0, 3);
  }
  return c;
}

// --log-level or DTRAIN_LOG_LEVEL (named `what`).
LogLevel log_level(const std::string& what, const std::string& v) {
  return parse_log_level(what, v, "what dtrun prints: errors only, its progress, or also the rendezvous and each "
                                  "worker's environment");
}

// torchrun reads "1, true, t, yes, y" and "0, false, f, no, n" (any case).
bool boolean(const std::string& opt, const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (l == "1" || l == "true" || l == "t" || l == "yes" || l == "y") return true;
  if (l == "0" || l == "false" || l == "f" || l == "no" || l == "n") return false;
  throw Error(opt + " '" + v + "' is not true or false");
}

// --rdzv-conf: the keys that map onto dtrun's settings; torchrun's others are noted and ignored.
void rdzv_conf(LaunchOptions& o, const std::string& v) {
  static const char* kIgnored[] = {"close_timeout", "heartbeat", "use_libuv", "store_type"};
  for (const auto& item : split(v, ',')) {
    const auto eq = item.find('=');
    require(
        eq != std::string::npos && eq > 0,
        "--rdzv-conf '" + v + "': '" + item + "' is not KEY=VALUE (e.g. --rdzv-conf join_timeout=600,read_timeout=60)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const std::string opt = "--rdzv-conf " + key;
    if (key == "join_timeout" || key == "timeout") {
      o.rdzv_timeout_s = to_int(opt, value, 1, kWeek);
    } else if (key == "read_timeout") {
      o.read_timeout_s = to_int(opt, value, 1, kWeek);
    } else if (key == "is_host") {
      o.is_host = boolean(opt, value);
    } else if (key == "last_call_timeout") {
      o.last_call_s = to_int(opt, value, 0, kWeek);
      o.elastic_keys.push_back(key);
    } else if (key == "keep_alive_interval") {
      o.keep_alive_s = to_int(opt, value, 1, 3600);  // every job: the host watches every node's heartbeat
    } else if (key == "keep_alive_max_attempt") {
      o.keep_alive_attempts = to_int(opt, value, 1, 1000);
    } else if (std::find(std::begin(kIgnored), std::end(kIgnored), key) != std::end(kIgnored)) {
      o.notes.push_back("--rdzv-conf " + key + " has no meaning for dtrun's rendezvous; ignored");
    } else {
      throw Error("--rdzv-conf: unknown key '" + key +
                  "': dtrun takes join_timeout, timeout, read_timeout, is_host, last_call_timeout, keep_alive_interval "
                  "and keep_alive_max_attempt (see `dtrun --help`)");
    }
  }
}

// --nproc-per-node N|cpu|gpu|auto.
int workers(const std::string& v, const LaunchHost& host) {
  if (v == "cpu") return std::clamp(host.cpus(), 1, kMaxWorkers);
  if (v == "gpu" || v == "auto") {
    std::string why_none;
    const int gpus = host.gpus(&why_none);
    if (gpus > 0) return std::min(gpus, kMaxWorkers);
    require(v == "auto", "--nproc-per-node gpu: " + why_none +
                             ": give the number of workers (--nproc-per-node N), or `cpu` for one per CPU");
    return std::clamp(host.cpus(), 1, kMaxWorkers);
  }
  return to_int("--nproc-per-node", v, 1, kMaxWorkers);
}

// --nnodes N or torchrun's MIN:MAX (an elastic range when MIN < MAX): {MIN, MAX}.
std::pair<int, int> nodes(const std::string& v) {
  const auto colon = v.find(':');
  if (colon == std::string::npos) {
    const int n = to_int("--nnodes", v, 1, kMaxNodes);
    return {n, n};
  }
  const int lo = to_int("--nnodes MIN", v.substr(0, colon), 1, kMaxNodes);
  const int hi = to_int("--nnodes MAX", v.substr(colon + 1), 1, kMaxNodes);
  require(lo <= hi, "--nnodes " + v + ": MIN is above MAX: write the fewest nodes first, e.g. --nnodes " +
                        std::to_string(hi) + ":" + std::to_string(lo));
  return {lo, hi};
}

// --monitor-interval S: seconds, decimals allowed (torchrun's is a float).
int interval_ms(const std::string& v) {
  char* end = nullptr;
  const double s = v.empty() ? -1 : std::strtod(v.c_str(), &end);
  require(end && *end == '\0' && std::isfinite(s) && s > 0 && s <= 3600,
          "--monitor-interval '" + v + "' is not a number of seconds above 0 and up to 3600 (e.g. 0.1)");
  return std::max(1, int(std::lround(s * 1000)));
}

}  // namespace

LaunchHost LaunchHost::here() {
  return {usable_cpus, [](std::string* why) { return visible_gpus(why); },
          [](const char* name) -> const char* { return std::getenv(name); }};
}

namespace {

// A parse under way: the options so far, and the endpoint if given torchrun's static way.
struct Parse {
  const LaunchHost& host;
  LaunchOptions o;
  bool endpoint_given = false, master_given = false, log_level_given = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// What an option takes: a value (--opt VALUE or --opt=VALUE), nothing (a flag), or nothing because
// it is refused whatever follows.
enum class Takes { value, nothing, refused };

// One option: its long name with dashes, what it takes, and what it does with its value (empty
// when it takes none); `opt` is the name as it reads in messages.
struct OptionRule {
  const char* name;
  Takes takes;
  void (*apply)(Parse& p, const std::string& opt, const std::string& v);
};

void rdzv_backend(LaunchOptions& o, const std::string& v) {
  require(v != "etcd" && v != "etcd-v2", "--rdzv-backend " + v +
                                             ": dtrun has no etcd rendezvous; its own TCP store does the job: drop "
                                             "--rdzv-backend (or write c10d) and give --rdzv-endpoint HOST:PORT");
  require(v == "c10d" || v == "static",
          "--rdzv-backend '" + v + "' is not c10d or static (both mean dtrun's rendezvous)");
  o.rdzv_backend = v;
}

[[noreturn]] void refuse(const std::string& opt) {
  if (opt == "--local-addr")
    throw Error("--local-addr is not supported: set DTRAIN_SOCKET_IFNAME to the interface the nodes reach this one on");
  throw Error((opt == "--module" ? std::string("-m/--module") : opt) +
              " runs a Python module or script; dtrun runs a program: give its path, e.g. "
              "dtrun --nproc-per-node 4 build/bin/dtrain train --config C");
}

using OptText = const std::string&;
const OptionRule kOptionRules[] = {
    // Workers and nodes
    {"--nproc-per-node", Takes::value, [](Parse& p, OptText, OptText v) { p.o.nproc_per_node = workers(v, p.host); }},
    {"--nnodes", Takes::value, [](Parse& p, OptText, OptText v) { std::tie(p.o.min_nodes, p.o.nnodes) = nodes(v); }},
    {"--node-rank", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.node_rank = to_int(opt, v, 0, kMaxNodes - 1); }},
    // Rendezvous
    {"--rdzv-endpoint", Takes::value,
     [](Parse& p, OptText, OptText v) {
       std::tie(p.o.rdzv_host, p.o.rdzv_port) = parse_host_port(v, "--rdzv-endpoint");
       p.endpoint_given = true;
     }},
    {"--master-addr", Takes::value,
     [](Parse& p, OptText, OptText v) {
       p.master_addr = v;
       require(!p.master_addr.empty(), "--master-addr needs a host name or address");
       p.master_given = true;
     }},
    {"--master-port", Takes::value,
     [](Parse& p, OptText opt, OptText v) {
       p.master_port = to_int(opt, v, 1, 65535);
       p.master_given = true;
     }},
    {"--rdzv-id", Takes::value,
     [](Parse& p, OptText, OptText v) {
       p.o.rdzv_id = v;
       require(!p.o.rdzv_id.empty(), "--rdzv-id needs a name (e.g. $SLURM_JOB_ID)");
     }},
    {"--rdzv-backend", Takes::value, [](Parse& p, OptText, OptText v) { rdzv_backend(p.o, v); }},
    {"--rdzv-conf", Takes::value, [](Parse& p, OptText, OptText v) { rdzv_conf(p.o, v); }},
    {"--standalone", Takes::nothing, [](Parse& p, OptText, OptText) { p.o.standalone = true; }},
    // Running
    {"--max-restarts", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.max_restarts = to_int(opt, v, 0, 10000); }},
    {"--rdzv-timeout", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.rdzv_timeout_s = to_int(opt, v, 1, kWeek); }},
    {"--stop-timeout", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.stop_timeout_s = to_int(opt, v, 0, 3600); }},
    {"--save-timeout", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.save_timeout_s = to_int(opt, v, 1, kWeek); }},
    {"--monitor-interval", Takes::value,
     [](Parse& p, OptText, OptText v) { p.o.monitor_interval_ms = interval_ms(v); }},
    {"--start-method", Takes::value,
     [](Parse&, OptText, OptText v) {
       require(v == "spawn" || v == "fork" || v == "forkserver",
               "--start-method '" + v + "' is not spawn, fork or forkserver (dtrun always uses fork and exec)");
     }},
    {"--no-python", Takes::nothing, [](Parse&, OptText, OptText) {}},
    {"--bind", Takes::value,
     [](Parse& p, OptText, OptText v) {
       p.o.bind = v;
       require(p.o.bind == "none" || p.o.bind == "cores",
               "--bind " + p.o.bind + ": give `cores` (each worker pinned to its own share of the CPUs) or `none`");
     }},
    {"--role", Takes::value,
     [](Parse& p, OptText, OptText v) {
       p.o.role = v;
       require(!p.o.role.empty(), "--role needs a name");
     }},
    // Output
    {"--log-level", Takes::value,
     [](Parse& p, OptText opt, OptText v) {
       p.o.log_level = log_level(opt, v);
       p.log_level_given = true;
     }},
    {"--no-tag", Takes::nothing, [](Parse& p, OptText, OptText) { p.o.output.tag = false; }},
    {"--only-ranks", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.output.only_ranks = int_list(opt, v, kMaxWorkers * kMaxNodes - 1); }},
    {"--local-ranks-filter", Takes::value,
     [](Parse& p, OptText opt, OptText v) { p.o.output.only_local_ranks = int_list(opt, v, kMaxWorkers - 1); }},
    {"--log-dir", Takes::value,
     [](Parse& p, OptText, OptText v) {
       p.o.output.log_dir = v;
       require(!p.o.output.log_dir.empty(), "--log-dir needs a folder");
     }},
    {"--redirects", Takes::value, [](Parse& p, OptText opt, OptText v) { p.o.output.redirects = streams(opt, v); }},
    {"--tee", Takes::value, [](Parse& p, OptText opt, OptText v) { p.o.output.tee = streams(opt, v); }},
    // Refused
    {"--module", Takes::refused, [](Parse&, OptText opt, OptText) { refuse(opt); }},
    {"--run-path", Takes::refused, [](Parse&, OptText opt, OptText) { refuse(opt); }},
    {"--local-addr", Takes::refused, [](Parse&, OptText opt, OptText) { refuse(opt); }},
};

const OptionRule* find_rule(const std::string& name) {
  for (const OptionRule& rule : kOptionRules)
    if (name == rule.name) return &rule;
  return nullptr;
}

// Reads the options in argv[1..] into p; returns where PROGRAM starts, or nothing for --help / -h.
std::optional<int> read_options(int argc, char** argv, Parse& p) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return i + 1;             // what follows is PROGRAM, even if it starts with a dash
    if (a.size() < 2 || a[0] != '-') break;  // PROGRAM starts here
    if (a == "-h") return std::nullopt;
    if (a == "-r") a = "--redirects";
    if (a == "-t") a = "--tee";
    if (a == "-m") a = "--module";
    require(a.rfind("--", 0) == 0, "unknown option " + a + ": see `dtrun --help`");
    std::string value;
    const auto eq = a.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    std::replace(a.begin(), a.end(), '_', '-');  // torchrun accepts both spellings
    if (a == "--help") return std::nullopt;
    const OptionRule* rule = find_rule(a);
    if (!rule) throw Error("unknown option " + a + ": see `dtrun --help`");
    if (rule->takes == Takes::nothing) require(!inline_value, a + " takes no value: write just " + a);
    if (rule->takes == Takes::value && !inline_value) {
      require(i + 1 < argc, a + " needs a value: see `dtrun --help`");
      value = argv[++i];
    }
    rule->apply(p, a, value);
  }
  return i;
}

// The endpoint, given once (--rdzv-endpoint, or --master-addr and --master-port), or none with
// --standalone.
void settle_endpoint(Parse& p) {
  LaunchOptions& o = p.o;
  require(!(p.endpoint_given && p.master_given),
          "give the endpoint once: --rdzv-endpoint HOST:PORT, or --master-addr and --master-port, not both");
  if (p.master_given) {
    o.rdzv_host = p.master_addr;
    o.rdzv_port = p.master_port;
  }
  if (o.standalone) {
    require(o.nnodes == 1, "--standalone runs one node: drop --nnodes or --standalone");
    require(!p.endpoint_given && !p.master_given,
            "--standalone picks its own endpoint: drop --rdzv-endpoint/--master-addr/--master-port or --standalone");
    require(o.is_host.value_or(true), "--standalone hosts its store: drop --rdzv-conf is_host=false or --standalone");
  }
}

// The node rank, when not given: SLURM's, or 0 on one node (an elastic job may go without one).
void settle_node_rank(LaunchOptions& o, const LaunchHost& host) {
  if (o.node_rank < 0) {
    const char* slurm = host.getenv("SLURM_NODEID");
    if (o.elastic()) {
      if (slurm && *slurm) o.node_rank = to_int("SLURM_NODEID", slurm, 0, kMaxNodes - 1);  // an order, no more
    } else if (o.nnodes == 1) {
      o.node_rank = 0;
    } else {
      require(slurm && *slurm,
              "--nnodes " + std::to_string(o.nnodes) +
                  " needs --node-rank on each node (or run dtrun under srun, which sets SLURM_NODEID)");
      o.node_rank = to_int("SLURM_NODEID", slurm, 0, kMaxNodes - 1);
    }
  }
  require(o.elastic() || o.node_rank < o.nnodes,
          "--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " + std::to_string(o.nnodes));
}

// A fixed-size job notes the --rdzv-conf keys given that only elastic jobs use.
void note_unused_elastic_keys(LaunchOptions& o) {
  if (!o.elastic()) {
    for (const auto& key : o.elastic_keys)
      o.notes.push_back("--rdzv-conf " + key + " has no meaning for a fixed-size job (--nnodes " +
                        std::to_string(o.nnodes) + "); it applies to elastic ones (--nnodes MIN:MAX); ignored");
  }
}

// The output options agree: local ranks this node has, and a log folder for the streams written.
void check_output(LaunchOptions& o) {
  for (int lr : o.output.only_local_ranks) {
    require(lr < o.nproc_per_node, "--local-ranks-filter " + std::to_string(lr) +
                                       ": this node's local ranks are 0 to " + std::to_string(o.nproc_per_node - 1));
  }
  for (const StreamChoice* c : {&o.output.redirects, &o.output.tee}) {
    for (const auto& [lr, mask] : c->per_local_rank) {
      require(lr < o.nproc_per_node, std::string(c == &o.output.tee ? "--tee" : "--redirects") + " names local rank " +
                                         std::to_string(lr) + ", but this node's local ranks are 0 to " +
                                         std::to_string(o.nproc_per_node - 1));
    }
  }
  const bool files = o.output.redirects.any() || o.output.tee.any();
  require(!files || !o.output.log_dir.empty(), std::string(o.output.redirects.any() ? "--redirects" : "--tee") +
                                                   " writes log files: add --log-dir DIR (the folder for them)");
  if (!o.output.log_dir.empty() && !files) {
    o.notes.push_back("--log-dir " + o.output.log_dir +
                      ": nothing is written there without --redirects or --tee (e.g. --tee 3 for every stream)");
  }
}

}  // namespace

LaunchOptions parse_launch_options(int argc, char** argv, const LaunchHost& host) {
  Parse p{host, {}};
  const std::optional<int> program = read_options(argc, argv, p);
  if (!program) return LaunchOptions{};
  for (int i = *program; i < argc; ++i) p.o.command.push_back(argv[i]);
  require(!p.o.command.empty(), "no program to run: write e.g. `dtrun --nproc-per-node 4 dtrain train --config C`");
  settle_endpoint(p);
  const char* level = host.getenv("DTRAIN_LOG_LEVEL");
  if (!p.log_level_given && level && *level) p.o.log_level = log_level("DTRAIN_LOG_LEVEL", level);
  settle_node_rank(p.o, host);
  note_unused_elastic_keys(p.o);
  check_output(p.o);
  return std::move(p.o);
}

}  // namespace dtrain
