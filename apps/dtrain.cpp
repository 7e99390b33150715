// dtrain: the command-line program (train, eval, generate, data, ckpt, debug, plan, report, scale,
// sweep). Thin: picks the command (src/train/commands/) and turns what it throws into one line and an
// exit status.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <system_error>
#include <thread>

#include "core/job_exit.hpp"
#include "core/limits.hpp"
#include "core/openmp_wait.hpp"
#include "train/commands/commands.hpp"
#include "train/elastic.hpp"

using namespace dtrain;

namespace {

const char* kUsage = R"(dtrain — train models (model.kind; `dtrain config keys` lists the kinds), on one process or many

usage:
  dtrain train --config FILE [--set key=value ...] [--run-dir DIR] [--resume auto]
              (--resume auto: go on with the run dir's run if it holds one, else start it; a finished run
              is left alone. SIGUSR1, SIGTERM or train.stop_before: every rank saves and exits 79, for the
              job to be requeued: docs/cluster.md. DTRAIN_LOG_LEVEL=quiet|info|debug: how much it prints)
  dtrain train --resume RUN_DIR|CHECKPOINT [--run-dir DIR] [--set key=value ...]
  dtrain eval --checkpoint DIR [--data DIR] [--split valid|test] [--batch-size N] [--threads N]
              [--precision f32|bf16]
  dtrain generate --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
  dtrain predict --checkpoint DIR --input FILE [--format idx|raw|auto] [--top K] [--batch-size N]
                 [--threads N] [--precision f32|bf16]
                 (an image classifier's classes for IDX images or raw uint8 pixels, a line per image)
  dtrain data prepare --input PATH --out DIR [--no-lowercase] [--no-eos] [--min-freq N] [--max-vocab N]
                      [--valid-fraction F] [--test-fraction F]   (plain text: split by paragraphs)
  dtrain data prepare --tokenizer FILE --input PATH [--input PATH ...] --out DIR [--split train|valid|test]
                      [--valid-fraction F] [--test-fraction F] [--seed S] [--docs-by file|line] [--text-key KEY]
                      [--dataset NAME] [--workers N] [--memory-mib M] [--shard-tokens N]
                      [--special-tokens text|special] [--no-eos] [--bos]
                      (token shards of text, JSONL or HDF5 files, gzip/zstd too: docs/data-format.md)
  dtrain data verify DIR              (a prepared folder of token shards: every checksum)
  dtrain data builtin --out DIR        (the offline default corpus: Debian's licence texts)
  dtrain data prepare --format idx --input DIR --out DIR [--valid-count N] [--seed S] [--classes N]
                      [--mean M --std S]   (MNIST-format images: train-images-idx3-ubyte[.gz], …;
                      found without --format too; valid is N train images, 5000 by default, by a
                      seeded shuffle; mean and std computed over train unless given)
  dtrain data fashion-mnist --out DIR [--valid-count N] [--seed S] [--mean M --std S]
                                       (Fashion-MNIST from Debian's package dataset-fashion-mnist)
  dtrain data tokenize --tokenizer FILE (--text STRING | --input FILE) [--decode]
                       [--special-tokens text|special]   (ids as a JSON array, a line per input line)
  dtrain data tokenizer train --input TEXT [--input …] --vocab-size N --out FILE.model
                       [--model-type bpe|unigram] [--no-byte-fallback] [--character-coverage C]
                       [--max-sentences N] [--threads N] [--seed S]   (a SentencePiece model)
  dtrain data stage DIR --to TARGET   (a copy on node-local storage, as data.stage makes: once per node)
  dtrain ckpt inspect DIR             (layout it was saved from, step, tensors, sizes)
  dtrain ckpt verify DIR              (every checksum)
  dtrain ckpt export DIR --out FILE.safetensors [--optimizer]   (whole weights + FILE.config.json beside)
  dtrain ckpt import FILE.safetensors --config CONFIG --out DIR [--vocab vocab.txt]
  dtrain debug dump --config FILE [--set key=value ...] --out DIR [--steps N]
  dtrain plan --pp P --microbatches M --schedule gpipe|1f1b|interleaved-1f1b|zb-h1|zb-v [--virtual V]
              [--costs F,B,I,W[,COMM][;F,B,I,W per further stage]] [--save LIST.txt] [--trace timeline.json]
  dtrain plan --file LIST.txt [--costs ...] [--trace ...]   (a pipeline schedule checked and simulated,
              printed as a time × rank grid; docs/pipeline.md)
  dtrain plan --config FILE [--set key=value ...] --world N [--hardware h100|a100|cpu|FILE] [--top K]
              [--mesh pp=P,dp_shard=S,tp=T,... | --mesh config] [--json]   (a whole job's layouts ranked by
              predicted step time, each rank's memory built as a run builds it; docs/planning.md)
  dtrain plan --calibrate [--ranks-per-node R] [--threads T] [--save FILE]   (this machine's hardware profile, measured)
  dtrain config keys                   (every config key: default, type or range, meaning)
  dtrain report RUN [RUN ...] [--out FILE]   (one self-contained HTML page: losses, throughput, step phases,
              resources, checkpoints, config; several runs overlaid; default RUN/report.html, or
              ./report.html for several runs)
  dtrain report SWEEP_DIR [--out FILE]   (a sweep's points overlaid and ranked by validation loss, or accuracy
              for a classifier; the ranking printed too; default SWEEP_DIR/report.html)
  dtrain scale --config FILE --nproc 1,2,4,8 [--mode strong|weak] [--threads-per-rank T] [--steps N]
               [--set key=value ...] [--launcher dtrun|srun] --out DIR
              (a scaling study: --steps steps, 20 by default, at each worker count into DIR/nproc_N, then
              DIR/scaling.csv and DIR/scaling.html; strong keeps train.batch_size as the global batch, weak
              as the batch per rank; docs/watching.md)
  dtrain sweep --config FILE --grid "KEY=V1,V2 KEY=V1,V2 ..." [--set key=value ...] [--out DIR]
               [--launcher local|slurm] [--nproc N] [--sbatch-args "ARGS"] [--dry-run]
              (hyper-parameter search: a `dtrain train` run per point of the grid's product, each in
              DIR/NAME, e.g. DIR/lr=1e-3,dim=128, DIR runs/sweep-<config name> by default; local runs them
              one after another (train.log in each), slurm submits a job array; run it again to go on;
              docs/sweeps.md)

Data parallel: start it with `dtrun --nproc-per-node N dtrain train ...` (see `dtrun --help`),
`srun dtrain train ...` or `mpirun -np N dtrain train ...`; docs/distributed.md.
)";

using Command = int (*)(int argc, char** argv);
const std::pair<const char*, Command> kCommands[] = {
    {"train", train_command},   {"eval", eval_command},   {"generate", generate_command}, {"predict", predict_command},
    {"data", data_command},     {"debug", debug_command}, {"ckpt", ckpt_command},         {"plan", plan_command},
    {"report", report_command}, {"scale", scale_command}, {"sweep", sweep_command},       {"config", config_command}};

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_openmp_wait(argv);  // may run this program again, before any thread starts
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach dtrun (or a log file) as they are written
  // What to lower when memory runs out, by command.
  const std::string memory_fix = cmd == "eval" ? "lower --batch-size"
                                 : cmd == "train"
                                     ? "lower train.batch_size (and raise train.grad_accum to keep the global batch)"
                                 : cmd == "debug" ? "lower train.batch_size"
                                                  : "free memory";
  install_fault_handlers(memory_fix);
  try {
    for (const auto& [name, run] : kCommands)
      if (cmd == name) return run(argc, argv);
    throw Error("unknown command `" + cmd +
                "`: use train, eval, generate, predict, data, ckpt, debug, plan, report, scale, sweep or config (see --help)");
  } catch (const StopForNewNodes& e) {
    // Every rank stopped at the same checkpoint; dtrun restarts the job with the waiting nodes.
    if (rank_or_zero() == 0)
      std::printf(
          "stopping after the checkpoint of step %lld: nodes wait to join, and dtrun restarts the job with "
          "them\n",
          (long long)e.step);
    return kExitForNewNodes;
  } catch (const ConfigError& e) {
    // Every rank found it: rank 0 says it, the others wait for the launcher to stop them (dtrun
    // and mpirun stop a job whose rank failed) and say it only if nothing does.
    const int rank = rank_or_zero();
    if (rank > 0) std::this_thread::sleep_for(std::chrono::seconds(10));
    if (rank > 0)
      std::fprintf(stderr, "dtrain: error: (rank %d) %s\n", rank, e.what());
    else
      std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return std::getenv("DTRAIN_AGENT") ? kExitConfigError : 2;  // dtrun: do not restart what will fail again
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc& e) {
    const auto* known = dynamic_cast<const AllocationFailed*>(&e);
    std::fprintf(stderr, "dtrain: error: %s\n",
                 out_of_memory(known ? known->subject() : "`dtrain " + cmd + "`", memory_fix).what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave that cannot be used
    std::fprintf(stderr, "dtrain: error: %s on %s: check the path and its permissions\n", e.code().message().c_str(),
                 e.path1().c_str());
    return 2;
  } catch (const std::system_error& e) {  // a thread the system would not start (EAGAIN)
    if (e.code() != std::errc::resource_unavailable_try_again) {
      std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
      return 3;
    }
    std::fprintf(stderr, "dtrain: error: %s\n",
                 thread_start_failed("a thread", "raise the limit, or lower train.threads").what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
    return 3;
  }
}
