// `dtrain data prepare --tokenizer`: the options checked, the tokenizer loaded, the corpus run through
// the chunk pipeline into one SplitWriter per split, and the splits committed (see prepare_shards.hpp).
#include "data/prepare_shards.hpp"

#include <array>
#include <atomic>
#include <filesystem>
#include <memory>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json.hpp"
#include "core/limits.hpp"
#include "core/output_path.hpp"
#include "data/chunk_encoder.hpp"
#include "data/chunk_pipeline.hpp"
#include "data/corpus_reader.hpp"
#include "data/prepare_progress.hpp"
#include "data/shard_format.hpp"
#include "data/shard_staging.hpp"
#include "data/shard_writer.hpp"
#include "data/token_shards.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int split_index(const std::string& name) {
  for (int s = 0; s < 3; ++s)
    if (name == kShardSplits[s]) return s;
  throw Error("--split " + name + ": use train, valid or test");
}

void check_request(const ShardPrepareOptions& o) {
  require(!o.out_dir.empty(), "no output folder given: pass one with --out");
  if (!o.split.empty()) split_index(o.split);
  require(o.valid_fraction >= 0 && o.test_fraction >= 0 && o.valid_fraction + o.test_fraction < 1,
          "--valid-fraction and --test-fraction must be >= 0 with a sum below 1 (got " +
              std::to_string(o.valid_fraction) + " and " + std::to_string(o.test_fraction) + "): fix the fractions");
  require(o.memory_mib >= kMinPrepareMemoryMib,
          "--memory-mib " + std::to_string(o.memory_mib) + " is too small: prepare holds chunks of " +
              std::to_string(kChunkTextBytes >> 20) + " MiB of text with their ids (" +
              std::to_string(chunk_budget_bytes() >> 20) + " MiB each) and needs room for two; give --memory-mib " +
              std::to_string(kMinPrepareMemoryMib) + " or more");
  require(o.shard_tokens >= 0, "--shard-tokens must be positive: give a count of tokens per shard");
  require(o.workers >= 0 && o.workers <= 1024, "--workers " + std::to_string(o.workers) + ": give 1 to 1024");
}

// The tokenizer and what the manifest says of it.
struct PrepareTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string bytes, copy_name;
  uint32_t crc = 0;
  int id_bytes = 4;
};

PrepareTokenizer load_tokenizer(const ShardPrepareOptions& o) {
  PrepareTokenizer t;
  t.tokenizer = Tokenizer::load(o.tokenizer);
  t.bytes = read_file(o.tokenizer, kMaxWholeFileBytes, "tokenizer file");
  t.crc = crc32c(t.bytes.data(), t.bytes.size());
  t.copy_name = tokenizer_copy_name(t.tokenizer->kind());
  const int64_t vocab = t.tokenizer->vocab_size();
  require(vocab > 0 && vocab <= int64_t(UINT32_MAX), "tokenizer " + o.tokenizer + " has a vocabulary of " +
                                                         std::to_string(vocab) + " ids, which shards cannot hold");
  t.id_bytes = shard_id_bytes(vocab);
  require(!o.eos || t.tokenizer->eos_id() >= 0, "tokenizer " + o.tokenizer + " has no EOS id to end documents with (" +
                                                    t.tokenizer->describe() + "): pass --no-eos, or use a tokenizer "
                                                    "that has one");
  require(!o.bos || t.tokenizer->bos_id() >= 0, "tokenizer " + o.tokenizer + " has no BOS id (" +
                                                    t.tokenizer->describe() + "): leave out --bos");
  return t;
}

// With --split: the splits already in out_dir must index the same tokenizer as the new one.
void check_other_splits(const ShardPrepareOptions& o, uint32_t crc) {
  for (const char* split : kShardSplits) {
    const fs::path manifest = fs::path(o.out_dir) / split / kManifestFile;
    std::error_code ec;
    if (split == o.split || !fs::exists(manifest, ec)) continue;
    const TokenShards other((fs::path(o.out_dir) / split).string());
    require(other.tokenizer_crc32c() == crc,
            "split " + (fs::path(o.out_dir) / split).string() + " was prepared with another tokenizer than " +
                o.tokenizer + ": prepare every split with one tokenizer (or into another --out)");
  }
}

Json manifest_context(const ShardPrepareOptions& o, const PrepareTokenizer& t) {
  Json c;
  c["tokenizer"] = {{"file", t.copy_name},
                    {"kind", t.tokenizer->kind()},
                    {"crc32c", t.crc},
                    {"vocab_size", t.tokenizer->vocab_size()},
                    {"eos_id", t.tokenizer->eos_id()},
                    {"bos_id", t.tokenizer->bos_id()}};
  c["inputs"] = o.inputs;
  c["options"] = {{"split", o.split.empty() ? "hash" : o.split},
                  {"valid_fraction", o.valid_fraction},
                  {"test_fraction", o.test_fraction},
                  {"seed", o.seed},
                  {"docs_by", o.docs_by_line ? "line" : "file"},
                  {"text_key", o.text_key},
                  {"dataset", o.dataset},
                  {"eos", o.eos},
                  {"bos", o.bos},
                  {"special_tokens", o.special == SpecialText::special ? "special" : "text"},
                  {"piece_bytes", kPieceBytes}};
  return c;
}

// The writer's side: each piece's ids to its document's split, with BOS and EOS around documents.
class DocumentRouter {
 public:
  DocumentRouter(const ShardPrepareOptions& o, const Tokenizer& t, std::array<std::unique_ptr<SplitWriter>, 3>& w)
      : o_(o), writers_(w), forced_(o.split.empty() ? -1 : split_index(o.split)),
        eos_(uint32_t(t.eos_id())), bos_(uint32_t(t.bos_id())) {}
  void write(const Chunk& c) {
    uint64_t from = 0;
    for (const DocPiece& p : c.pieces) {
      if (p.first) {
        split_ = forced_ >= 0 ? forced_ : split_of_document(p.doc, o_.seed, o_.valid_fraction, o_.test_fraction);
        has_ids_ = false;
      }
      SplitWriter& w = *writers_[size_t(split_)];
      if (p.ids_end > from) {
        if (!has_ids_ && o_.bos) w.append(std::span(&bos_, 1));
        w.append(std::span(c.ids).subspan(from, p.ids_end - from));
        has_ids_ = true;
      }
      from = p.ids_end;
      if (!p.last) continue;
      if (!has_ids_) {
        w.skip_document();
        continue;
      }
      if (o_.eos) w.append(std::span(&eos_, 1));
      w.end_document();
    }
  }
  int64_t tokens() const {
    int64_t n = 0;
    for (const auto& w : writers_) n += w ? w->tokens() : 0;
    return n;
  }

 private:
  const ShardPrepareOptions& o_;
  std::array<std::unique_ptr<SplitWriter>, 3>& writers_;
  const int forced_;
  const uint32_t eos_, bos_;
  int split_ = 0;
  bool has_ids_ = false;
};

}  // namespace

int split_of_document(uint64_t doc, uint64_t seed, double valid_fraction, double test_fraction) {
  const double u = double(mix64(seed ^ mix64(doc)) >> 11) * 0x1.0p-53;
  return u < valid_fraction ? 1 : u < valid_fraction + test_fraction ? 2 : 0;
}

void check_shards_output(const std::string& out_dir) {
  std::vector<std::string> mine = {"vocab.txt", "tokenizer.json", "tokenizer.model"};
  for (const char* s : kShardSplits)
    for (const char* tail : {"", "/*", ".partial", ".partial/*", ".old.*", ".old.*/*"})
      mine.push_back(std::string(s) + tail);
  check_output_folder(out_dir, "dtrain data prepare --tokenizer", holds_only(mine));
}

namespace {

// Each split's manifest, then the tokenizer copy and the splits moved into place.
void commit_splits(const ShardPrepareOptions& o, const PrepareTokenizer& t, ShardStaging& staging,
                   std::array<std::unique_ptr<SplitWriter>, 3>& writers, ShardPrepareReport& r) {
  int64_t documents = 0, skipped = 0;
  for (const auto& w : writers) documents += w ? w->documents() : 0, skipped += w ? w->skipped() : 0;
  require(documents > 0, "the inputs hold no documents that " + o.tokenizer + " encodes to any token (" +
                             std::to_string(r.files) + (r.files == 1 ? " file" : " files") + " read, " +
                             std::to_string(skipped) + " empty documents skipped): check --input" + (o.text_key != "text" ? ", --text-key" : "") +
                             (o.dataset.empty() ? "" : ", --dataset") + " and that the files hold text");
  const Json context = manifest_context(o, t);
  std::vector<int> written, emptied;
  for (int s = 0; s < 3; ++s) {
    if (!writers[size_t(s)]) continue;
    SplitWriter& w = *writers[size_t(s)];
    if (w.documents() == 0) {
      emptied.push_back(s);
      continue;
    }
    w.finish(context);
    written.push_back(s);
    r.splits.push_back({kShardSplits[s], w.documents(), w.tokens(), w.shards(), w.skipped()});
  }
  staging.commit(written, emptied, t.copy_name, t.bytes, o.split.empty());
}

}  // namespace

ShardPrepareReport prepare_shards(const ShardPrepareOptions& o) {
  check_request(o);
  const std::vector<CorpusFile> files = list_corpus_files(o.inputs);
  const PrepareTokenizer t = load_tokenizer(o);
  check_shards_output(o.out_dir);
  if (!o.split.empty()) check_other_splits(o, t.crc);

  ShardPrepareReport r;
  r.tokenizer_kind = t.tokenizer->kind();
  r.vocab_size = t.tokenizer->vocab_size();
  r.id_bytes = t.id_bytes;
  r.files = int64_t(files.size());
  for (const CorpusFile& f : files) r.input_bytes += f.bytes;
  r.workers = o.workers > 0 ? o.workers : usable_cpus();

  ShardStaging staging(o.out_dir);
  std::array<std::unique_ptr<SplitWriter>, 3> writers;
  for (int s = 0; s < 3; ++s)
    if (o.split.empty() || o.split == kShardSplits[s])
      writers[size_t(s)] = std::make_unique<SplitWriter>(SplitWriterSettings{
          kShardSplits[s], staging.partial(s), t.id_bytes, uint32_t(r.vocab_size), t.crc,
          o.shard_tokens > 0 ? o.shard_tokens : default_shard_tokens(t.id_bytes)});

  MemoryBudget budget(o.memory_mib << 20);
  std::atomic<uint64_t> consumed{0};
  PrepareProgress progress(r.input_bytes);
  DocumentRouter router(o, *t.tokenizer, writers);
  const CorpusReadOptions read_options{o.docs_by_line, o.text_key, o.dataset, r.vocab_size, o.tokenizer};
  const ChunkEncoding encoding{t.tokenizer.get(), o.special, o.text_key, &files};
  ChunkPipeline p;
  p.workers = r.workers;
  p.budget = &budget;
  p.input_read = &consumed;
  p.read = [&](ChunkBuilder& b) {
    CorpusCursor cursor{b, budget, consumed};
    read_corpus(files, read_options, cursor);
  };
  p.encode = [&](Chunk& c) { encode_chunk(c, encoding); };
  p.write = [&](Chunk& c) {
    router.write(c);
    progress.update(c.input_done, router.tokens());
  };
  run_chunk_pipeline(p);

  commit_splits(o, t, staging, writers, r);
  progress.finish(r.input_bytes, router.tokens());
  r.seconds = progress.seconds();
  r.budget_peak_bytes = budget.peak();
  return r;
}

}  // namespace dtrain
