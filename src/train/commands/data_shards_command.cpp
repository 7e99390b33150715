// `dtrain data prepare --tokenizer` and `dtrain data verify` (see data_shards_command.hpp).
#include "train/commands/data_shards_command.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "data/prepare.hpp"
#include "data/prepare_shards.hpp"
#include "data/shard_format.hpp"
#include "data/token_shards.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

ShardPrepareOptions shard_options(const CommandArgs& a) {
  for (const char* k : {"min-freq", "max-vocab", "format", "valid-count", "classes", "mean", "std"})
    require(a.get(k).empty(), std::string("--") + k + " is an option of the word-level prepare (without --tokenizer)");
  require(!a.flag("no-lowercase"), "--no-lowercase is an option of the word-level prepare (without --tokenizer): "
                                   "the tokenizer decides about case");
  ShardPrepareOptions o;
  o.tokenizer = a.need("tokenizer");
  for (auto [it, end] = a.opts.equal_range("input"); it != end; ++it) o.inputs.push_back(it->second);
  o.out_dir = a.need("out");
  o.split = a.get("split");
  o.valid_fraction = a.number("valid-fraction", o.valid_fraction);
  o.test_fraction = a.number("test-fraction", o.test_fraction);
  if (!o.split.empty())
    require(a.get("valid-fraction").empty() && a.get("test-fraction").empty(),
            "--split puts every document in one split: leave out --valid-fraction and --test-fraction");
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  o.text_key = a.get("text-key", o.text_key);
  o.dataset = a.get("dataset");
  const std::string docs_by = a.get("docs-by", "file");
  require(docs_by == "file" || docs_by == "line", "--docs-by " + docs_by + ": use file (a text file is a document, "
                                                  "the default) or line (each non-blank line is one)");
  o.docs_by_line = docs_by == "line";
  o.workers = int(a.integer("workers", 0, 1, 1024));
  o.memory_mib = a.integer("memory-mib", o.memory_mib, 1, int64_t(1) << 30);
  o.shard_tokens = a.integer("shard-tokens", 0, 1, int64_t(1) << 40);
  o.special = parse_special_text(a.get("special-tokens", "text"));
  o.eos = !a.flag("no-eos");
  o.bos = a.flag("bos");
  return o;
}

std::string mb(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MB", bytes / 1e6);
  return s;
}

// A folder of ready-made splits (WikiText-2's wiki.*.tokens, train.txt/valid.txt/test.txt, the built-in
// corpus's text/): each file prepared into its split, when --split and the fractions are not given.
std::vector<ShardPrepareOptions> by_split_files(const ShardPrepareOptions& o, const CommandArgs& a) {
  std::error_code ec;
  if (!o.split.empty() || o.inputs.size() != 1 || !fs::is_directory(o.inputs[0], ec) ||
      !a.get("valid-fraction").empty() || !a.get("test-fraction").empty())
    return {o};
  const std::optional<SplitFiles> files = find_split_files(o.inputs[0]);
  if (!files) return {o};
  std::vector<ShardPrepareOptions> each;
  for (const auto& [split, file] : {std::pair{"train", files->train}, {"valid", files->valid}, {"test", files->test}}) {
    ShardPrepareOptions one = o;
    one.split = split;
    one.inputs = {file};
    each.push_back(one);
  }
  return each;
}

void print_prepared(const ShardPrepareOptions& o, const ShardPrepareReport& r) {
  std::printf("prepared %s: %lld files, %s in %.1f s (%.1f MB/s, %d workers); tokenizer %s of %lld ids, %s ids\n",
              o.out_dir.c_str(), (long long)r.files, mb(double(r.input_bytes)).c_str(), r.seconds,
              r.seconds > 0 ? double(r.input_bytes) / 1e6 / r.seconds : 0.0, r.workers, r.tokenizer_kind.c_str(),
              (long long)r.vocab_size, r.id_bytes == 2 ? "uint16" : "uint32");
  int64_t skipped = 0;
  for (const ShardSplitReport& s : r.splits) {
    std::printf("  %s: %lld documents, %lld tokens, %lld shard%s\n", s.split.c_str(), (long long)s.documents,
                (long long)s.tokens, (long long)s.shards, s.shards == 1 ? "" : "s");
    skipped += s.skipped;
  }
  if (skipped > 0) std::printf("  skipped %lld documents that encode to no tokens\n", (long long)skipped);
}

}  // namespace

void refuse_shard_options(const CommandArgs& a) {
  for (const char* k : {"tokenizer", "split", "text-key", "dataset", "workers", "memory-mib", "shard-tokens",
                        "special-tokens", "docs-by"})
    require(a.get(k).empty(), std::string("--") + k + " is an option of `dtrain data prepare --tokenizer FILE` (token "
                                                      "shards): add --tokenizer, or leave it out");
  require(!a.flag("bos"), "--bos is an option of `dtrain data prepare --tokenizer FILE`: add --tokenizer, or leave it out");
  require(a.opts.count("input") <= 1, "the word-level prepare reads one --input (a file or a folder): give one, "
                                      "or prepare shards with --tokenizer");
}

int prepare_shards_command(const CommandArgs& a) {
  for (const ShardPrepareOptions& o : by_split_files(shard_options(a), a)) print_prepared(o, prepare_shards(o));
  return 0;
}

int verify_shards_command(const CommandArgs& a) {
  require(a.positional.size() == 1, "usage: dtrain data verify DIR (a folder prepared with --tokenizer, or one "
                                    "of its splits)");
  const std::string dir = a.positional[0];
  std::vector<std::string> splits;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / kManifestFile, ec)) {
    splits.push_back(dir);
  } else {
    for (const char* s : kShardSplits)
      if (fs::exists(fs::path(dir) / s / kManifestFile, ec)) splits.push_back((fs::path(dir) / s).string());
  }
  require(!splits.empty(), dir + " holds no prepared split (train/, valid/ or test/ with a manifest.json): give a "
                           "folder made by dtrain data prepare --tokenizer");
  for (const std::string& split : splits) {
    const TokenShards shards(split);
    shards.verify();
    std::printf("%s: OK (%lld documents, %lld tokens, %lld shard%s)\n", split.c_str(), (long long)shards.documents(),
                (long long)shards.tokens(), (long long)shards.shard_count(), shards.shard_count() == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace dtrain
