// ShardSource: token shards (train, valid, test) and the tokenizer file they index, as a run's data.
// The checkpoints keep the tokenizer file; data tokenized by another one is refused by its checksum.
#include "data/shard_source.hpp"

#include <filesystem>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/shard_dataset.hpp"
#include "data/token_shards.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace dtrain {

std::string find_tokenizer_file(const std::string& dir) {
  for (const char* name : {"tokenizer.model", "tokenizer.json", "vocab.txt"})
    if (std::filesystem::is_regular_file(dir + "/" + name)) return dir + "/" + name;
  return "";
}

namespace {

const std::string kPrepare = "`dtrain data prepare --tokenizer FILE --input CORPUS --out DIR`";

class ShardSource : public DataSource {
 public:
  explicit ShardSource(const std::string& dir)
      : dir_(dir), tokenizer_path_(find_tokenizer_file(dir)), train_(open_split("train")),
        valid_(open_split("valid")), test_(open_split("test")) {
    require(!tokenizer_path_.empty(), "data " + dir + " has token shards but no tokenizer file (tokenizer.model, "
                                      "tokenizer.json or vocab.txt): prepare it again with " + kPrepare);
    const std::string bytes = read_file(tokenizer_path_, kMaxWholeFileBytes, "tokenizer file");
    tokenizer_crc_ = crc32c(bytes.data(), bytes.size());
    for (const TokenShards* s : {&train_, &valid_, &test_})
      require(s->tokenizer_crc32c() == tokenizer_crc_ && s->vocab_size() == train_.vocab_size(),
              "data " + s->dir() + " was tokenized by another tokenizer than " + tokenizer_path_ +
                  " (its manifest records another checksum): prepare the folder again with " + kPrepare);
  }
  const std::string& dir() const override { return dir_; }
  DataFacts facts() const override { return {train_.vocab_size()}; }
  std::string vocab_path() const override { return tokenizer_path_; }
  KeptFile kept_file() const override {
    return {std::filesystem::path(tokenizer_path_).filename().string(), tokenizer_path_};
  }
  std::string fingerprint() const override {
    return "token shards: tokenizer crc32c " + std::to_string(tokenizer_crc_) + " (" +
           std::to_string(train_.vocab_size()) + " tokens); tokens train " + std::to_string(train_.tokens()) +
           ", valid " + std::to_string(valid_.tokens()) + ", test " + std::to_string(test_.tokens());
  }
  std::string unlike_kept(const std::string& kept_bytes, const std::string& kept_path) const override {
    if (crc32c(kept_bytes.data(), kept_bytes.size()) == tokenizer_crc_) return "";
    return "another tokenizer (" + kept_path + ") than the one " + dir_ + " was tokenized by (" + tokenizer_path_ + ")";
  }
  std::string note() const override { return ""; }
  std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample,
                                 const WindowOptions& windows) const override {
    DT_ASSERT(sample.input == InputKind::tokens && sample.inputs == sample.targets);
    const TokenShards& s = name == "train" ? train_ : name == "valid" ? valid_ : test_;
    return std::make_unique<ShardWindowDataset>(s, sample.inputs, windows);
  }
  std::string row_unit() const override { return "tokens"; }
  std::string describe(int64_t n, const SampleShape& sample) const override {
    return std::to_string(n) + " windows of " + std::to_string(sample.inputs) + " tokens";
  }

 private:
  TokenShards open_split(const std::string& split) const {
    const std::string p = dir_ + "/" + split;
    require(std::filesystem::exists(p + "/manifest.json"),
            "data " + dir_ + " has no " + split + " split (" + p + "/manifest.json): prepare one with " + kPrepare +
                " --split " + split + ", or give --valid-fraction and --test-fraction so every split gets documents");
    return TokenShards(p);
  }

  std::string dir_, tokenizer_path_;
  TokenShards train_, valid_, test_;
  uint32_t tokenizer_crc_ = 0;
};

}  // namespace

std::unique_ptr<DataSource> open_shard_source(const std::string& dir) { return std::make_unique<ShardSource>(dir); }

}  // namespace dtrain
