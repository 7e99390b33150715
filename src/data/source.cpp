// DataSource (see source.hpp): token data, prepared by `dtrain data prepare` or `dtrain data builtin`.
#include "data/source.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "data/token_file.hpp"
#include "data/vocab.hpp"

namespace dtrain {

namespace {

// A prepared folder: train.bin, valid.bin, test.bin and the vocab.txt they index.
class TokenSource : public DataSource {
 public:
  explicit TokenSource(const std::string& dir)
      : dir_(dir), train_(open_split("train")), valid_(open_split("valid")), test_(open_split("test")) {
    // checkpoints copy vocab.txt, and generate needs it to fit the model
    if (!check_vocab_matches(vocab_path(), {&train_, &valid_, &test_}))
      note_ = "note: " + dir_ + " was prepared by an older dtrain, whose token files hold no checksum of vocab.txt: "
              "prepare it again to have the vocabulary checked";
  }
  const std::string& dir() const override { return dir_; }
  DataFacts facts() const override { return {int64_t(train_.vocab_size())}; }
  std::string vocab_path() const override { return dir_ + "/vocab.txt"; }
  std::string note() const override { return note_; }
  std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample, int64_t stride) const override {
    DT_ASSERT(sample.input == InputKind::tokens && sample.inputs == sample.targets);
    const TokenFile& f = name == "train" ? train_ : name == "valid" ? valid_ : test_;
    return std::make_unique<WindowDataset>(f, sample.inputs, stride > 0 ? stride : sample.inputs);
  }
  std::string row_unit() const override { return "tokens"; }
  std::string describe(int64_t n, const SampleShape& sample) const override {
    return std::to_string(n) + " windows of " + std::to_string(sample.inputs) + " tokens";
  }

 private:
  TokenFile open_split(const std::string& split) const {
    const std::string p = dir_ + "/" + split + ".bin";
    require(std::filesystem::exists(p), "data dir " + dir_ + " has no " + split + ".bin: prepare it with `dtrain data "
                                        "prepare --input YOUR_TEXT --out " + dir_ + "` (or `dtrain data builtin --out " +
                                        dir_ + "`)");
    TokenFile f(p);
    f.check_ids();  // a corrupt id would index outside the embedding
    return f;
  }

  std::string dir_, note_;
  TokenFile train_, valid_, test_;
};

}  // namespace

std::unique_ptr<DataSource> DataSource::open(const std::string& dir, InputKind input) {
  require(input == InputKind::tokens,
          "the model reads images, and data " + dir + " can only be read as token files so far: "
          "dtrain has no image data reader yet");
  return std::make_unique<TokenSource>(dir);
}

}  // namespace dtrain
