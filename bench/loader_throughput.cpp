// bench_loader: the data loader's throughput per rank (bench/data.sh). `write` makes a synthetic
// prepared folder of random ids (SplitWriter: the format of docs/data-format.md, checksums and all);
// `read` times the trainer's path through it: TokenShards → ShardWindowDataset → DistributedSampler's
// seeded shuffle → BatchLoader (prefetching), with this corpus's page cache cold or warm. One JSON line.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json.hpp"
#include "data/loader.hpp"
#include "data/sampler.hpp"
#include "data/shard_dataset.hpp"
#include "data/shard_format.hpp"
#include "data/shard_writer.hpp"
#include "data/token_shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "page_cache.hpp"

namespace {

const char* kUsage =
    "usage: bench_loader write --tokenizer FILE --out DIR [--gb 5] [--doc-tokens 2048] [--shard-tokens N] [--seed 1]\n"
    "         DIR/train: gb × 1e9 bytes of random ids below the tokenizer's vocabulary, documents of 1 to\n"
    "         2·doc-tokens−1 tokens (uniform) each ended by EOS; shards of --shard-tokens (default 1 GiB)\n"
    "       bench_loader read --data DIR/train [--seq 1024] [--batch 8] [--cache cold|warm|as-is] [--batches N]\n"
    "         [--seconds S] [--first-batches 100] [--ranks R] [--rank r] [--seed 1] [--epoch 0]\n"
    "         [--document-boundaries 0|1]\n"
    "         batches of the rank's share of the seeded shuffle until N batches (default 0: no limit) or S seconds\n"
    "         (default 10) have been read; cold: the split's files evicted from the page cache first, warm: read in,\n"
    "         mapped: read in and every page touched through the shards' mappings (as after an earlier epoch);\n"
    "         \"first\": the same figures for the first --first-batches batches alone\n"
    "       bench_loader cache --data DIR/train --cache cold|warm   (that alone, for reads of several ranks at once)\n";

using Clock = std::chrono::steady_clock;
using Args = std::map<std::string, std::string>;

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    dtrain::require(flag.rfind("--", 0) == 0 && i + 1 < argc, "flag " + flag + " needs a value: see --help");
    a[flag.substr(2)] = argv[i + 1];
  }
  return a;
}

std::string arg(const Args& a, const std::string& key, const std::string& fallback) {
  const auto it = a.find(key);
  if (it != a.end()) return it->second;
  dtrain::require(!fallback.empty(), "--" + key + " is needed: see --help");
  return fallback;
}

double number(const Args& a, const std::string& key, const std::string& fallback) {
  return std::stod(arg(a, key, fallback));
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random ids below vocab, never eos, into out.
void random_ids(uint64_t& state, uint32_t vocab, uint32_t eos, std::vector<uint32_t>& out) {
  for (uint32_t& id : out) {
    id = uint32_t(((splitmix64(state) >> 32) * vocab) >> 32);
    if (id == eos) id = 0;
  }
}

dtrain::Json write_context(const dtrain::Tokenizer& t, const std::string& copy, uint32_t crc, const Args& a) {
  dtrain::Json c;
  c["tokenizer"] = {{"file", copy},         {"kind", t.kind()},    {"crc32c", crc}, {"vocab_size", t.vocab_size()},
                    {"eos_id", t.eos_id()}, {"bos_id", t.bos_id()}};
  c["inputs"] = dtrain::Json::array();
  c["options"] = {
      {"synthetic", "bench_loader write"}, {"seed", arg(a, "seed", "1")}, {"doc_tokens", arg(a, "doc-tokens", "2048")}};
  return c;
}

int write_command(const Args& a) {
  const auto t0 = Clock::now();
  const std::string tok_path = arg(a, "tokenizer", ""), out = arg(a, "out", "");
  const auto tok = dtrain::Tokenizer::load(tok_path);
  const std::string bytes = dtrain::read_file(tok_path, dtrain::kMaxWholeFileBytes, "tokenizer file");
  const std::string copy = dtrain::tokenizer_copy_name(tok->kind());
  std::filesystem::create_directories(out);
  std::ofstream(std::filesystem::path(out) / copy, std::ios::binary) << bytes;
  dtrain::SplitWriterSettings s;
  s.split = "train";
  s.dir = (std::filesystem::path(out) / "train").string();
  s.id_bytes = dtrain::shard_id_bytes(tok->vocab_size());
  s.vocab_size = uint32_t(tok->vocab_size());
  s.tokenizer_crc32c = dtrain::crc32c(bytes.data(), bytes.size());
  s.shard_tokens = int64_t(number(a, "shard-tokens", std::to_string(dtrain::default_shard_tokens(s.id_bytes))));
  dtrain::SplitWriter w(s);
  const int64_t total = int64_t(number(a, "gb", "5") * 1e9) / s.id_bytes,
                mean = int64_t(number(a, "doc-tokens", "2048"));
  uint64_t state = uint64_t(number(a, "seed", "1"));
  std::vector<uint32_t> ids;
  dtrain::require(tok->eos_id() >= 0 && mean >= 1, "the tokenizer needs an EOS id, --doc-tokens a positive count");
  const uint32_t eos = uint32_t(tok->eos_id());
  while (w.tokens() < total) {
    ids.resize(size_t(std::min<int64_t>(1 + int64_t(splitmix64(state) % uint64_t(2 * mean - 1)), total - w.tokens())));
    random_ids(state, s.vocab_size, eos, ids);
    ids.back() = eos;
    w.append(ids);
    w.end_document();
  }
  const dtrain::Json m = w.finish(write_context(*tok, copy, s.tokenizer_crc32c, a));
  dtrain::Json r = {{"tokens", m["tokens"]},
                    {"documents", m["documents"]},
                    {"shards", m["shards"].size()},
                    {"id_bytes", s.id_bytes},
                    {"seconds", seconds_since(t0)}};
  std::printf("%s\n", r.dump().c_str());
  return 0;
}

// Storage bytes this process has caused to be read (/proc/self/io read_bytes: page faults' readahead included).
int64_t storage_read_bytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "read_bytes:") return value;
  return -1;
}

int64_t major_faults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_majflt;
}

void prepare_cache(const std::string& dir, const std::string& mode) {
  if (mode == "cold")
    bench_cache::evict(dir);
  else if (mode == "warm" || mode == "mapped")
    bench_cache::load(dir);
  else
    dtrain::require(mode == "as-is", "--cache " + mode + ": use cold, warm, mapped or as-is");
}

// Every page of the shards touched once through their mappings (as an earlier epoch of this process would).
void touch_pages(const dtrain::TokenShards& shards) {
  const int64_t step = 4096 / shards.id_bytes();
  int32_t id = 0;
  for (int64_t t = 0; t < shards.tokens(); t += step) shards.copy(t, 1, &id);
}

// What a timed stretch of batches read: batches, seconds, storage bytes, major faults.
struct Stretch {
  int64_t batches = 0, storage = 0, faults = 0;
  double seconds = 0;
};

// Reads batches until max_batches (0: no limit) or max_seconds; `first` gets the first first_batches of them.
Stretch read_batches(dtrain::BatchLoader& loader, int64_t max_batches, double max_seconds, int64_t first_batches,
                     Stretch& first) {
  const int64_t io0 = storage_read_bytes(), flt0 = major_faults();
  auto taken = [&](int64_t n, Clock::time_point t0) {
    return Stretch{n, storage_read_bytes() - io0, major_faults() - flt0, seconds_since(t0)};
  };
  dtrain::Batch batch;
  int64_t n = 0;
  const auto t0 = Clock::now();
  first = Stretch{};
  while ((max_batches == 0 || n < max_batches) && seconds_since(t0) < max_seconds && loader.next(batch))
    if (++n == first_batches) first = taken(n, t0);
  if (first.batches == 0) first = taken(n, t0);
  return taken(n, t0);
}

dtrain::Json stretch_json(const Stretch& s, int64_t tokens_per_batch, int id_bytes) {
  const double tokens = double(s.batches * tokens_per_batch);
  return {{"batches", s.batches},
          {"tokens", tokens},
          {"seconds", s.seconds},
          {"tokens_per_s", tokens / s.seconds},
          {"mb_per_s", tokens * id_bytes / s.seconds / 1e6},
          {"storage_mb", double(s.storage) / 1e6},
          {"major_faults", s.faults}};
}

int read_command(const Args& a) {
  const std::string dir = arg(a, "data", ""), cache = arg(a, "cache", "cold");
  const int64_t seq = int64_t(number(a, "seq", "1024")), bsz = int64_t(number(a, "batch", "8"));
  prepare_cache(dir, cache);
  const double resident = bench_cache::resident_share(dir);
  const auto t_open = Clock::now();
  const dtrain::TokenShards shards(dir);
  if (cache == "mapped") touch_pages(shards);
  dtrain::WindowOptions wo;
  wo.document_boundaries = number(a, "document-boundaries", "0") != 0;
  const dtrain::ShardWindowDataset data(shards, seq, wo);
  dtrain::DistributedSampler sampler(data.size(), true, uint64_t(number(a, "seed", "1")), int(number(a, "ranks", "1")),
                                     int(number(a, "rank", "0")), true);
  sampler.set_epoch(int64_t(number(a, "epoch", "0")));
  dtrain::BatchLoader loader(data, sampler, bsz, true);
  loader.start_epoch();
  const double open_s = seconds_since(t_open);
  Stretch first;
  const Stretch all = read_batches(loader, int64_t(number(a, "batches", "0")), number(a, "seconds", "10"),
                                   int64_t(number(a, "first-batches", "100")), first);
  dtrain::Json r = {{"cache", cache},
                    {"resident_before", resident},
                    {"windows", data.size()},
                    {"rank_windows", sampler.size()},
                    {"open_and_shuffle_s", open_s},
                    {"id_bytes", shards.id_bytes()},
                    {"corpus_tokens", shards.tokens()}};
  r.update(stretch_json(all, bsz * seq, shards.id_bytes()));
  r["first"] = stretch_json(first, bsz * seq, shards.id_bytes());
  std::printf("%s\n", r.dump().c_str());
  return 0;
}

int cache_command(const Args& a) {
  const std::string dir = arg(a, "data", ""), cache = arg(a, "cache", "");
  const auto t0 = Clock::now();
  prepare_cache(dir, cache);
  const dtrain::Json r = {
      {"cache", cache}, {"seconds", seconds_since(t0)}, {"resident", bench_cache::resident_share(dir)}};
  std::printf("%s\n", r.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write") return write_command(parse_args(argc, argv));
    if (cmd == "read") return read_command(parse_args(argc, argv));
    if (cmd == "cache") return cache_command(parse_args(argc, argv));
    std::fputs(kUsage, cmd == "-h" || cmd == "--help" ? stdout : stderr);
    return cmd == "-h" || cmd == "--help" ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return 1;
  }
}
