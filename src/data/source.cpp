// DataSource (see source.hpp): token data, prepared by `dtrain data prepare` or `dtrain data builtin`,
// and image data, prepared by `dtrain data prepare --format idx` or `dtrain data fashion-mnist`.
#include "data/source.hpp"

#include <cstdio>
#include <filesystem>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/image_file.hpp"
#include "data/shard_source.hpp"
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
    const std::string vocab = read_file(vocab_path());
    vocab_crc_ = crc32c(vocab.data(), vocab.size());
  }
  const std::string& dir() const override { return dir_; }
  DataFacts facts() const override { return {int64_t(train_.vocab_size())}; }
  std::string vocab_path() const override { return dir_ + "/vocab.txt"; }
  KeptFile kept_file() const override { return {"vocab.txt", vocab_path()}; }
  std::string fingerprint() const override {
    return "tokens: vocabulary crc32c " + std::to_string(vocab_crc_) + " (" +
           std::to_string(train_.vocab_size()) + " words); tokens train " + std::to_string(train_.size()) +
           ", valid " + std::to_string(valid_.size()) + ", test " + std::to_string(test_.size());
  }
  std::string unlike_kept(const std::string& kept_bytes, const std::string&) const override {
    if (crc32c(kept_bytes.data(), kept_bytes.size()) == vocab_crc_) return "";
    return "another vocabulary than " + vocab_path() + " (" + std::to_string(Vocabulary::load(vocab_path()).size()) +
           " words, but not the same ones)";
  }
  std::string note() const override { return note_; }
  std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample,
                                 const WindowOptions& windows) const override {
    DT_ASSERT(sample.input == InputKind::tokens && sample.inputs == sample.targets);
    require(!windows.document_boundaries,
            "data " + dir_ + " holds word-level token files without a document index, so data.document_boundaries "
            "= true cannot be honoured: prepare it with `dtrain data prepare --tokenizer FILE`, or set it false");
    const TokenFile& f = name == "train" ? train_ : name == "valid" ? valid_ : test_;
    return std::make_unique<WindowDataset>(f, sample.inputs, windows.stride > 0 ? windows.stride : sample.inputs);
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
  uint32_t vocab_crc_ = 0;  // of vocab.txt's bytes: what the ranks compare and checkpoints kept
};

const std::string kPrepareImages = "`dtrain data fashion-mnist --out DIR` or `dtrain data prepare --format idx "
                                   "--input IDX_FOLDER --out DIR`";

// A prepared folder of images: train.images, valid.images, test.images and the meta.json that
// describes them (the normalisation, the class names).
class ImageSource : public DataSource {
 public:
  explicit ImageSource(const std::string& dir)
      : dir_(dir),
        meta_(read_image_meta(dir + "/meta.json")),
        train_(open_split("train", meta_.train)),
        valid_(open_split("valid", meta_.valid)),
        test_(open_split("test", meta_.test)) {}
  const std::string& dir() const override { return dir_; }
  DataFacts facts() const override {
    DataFacts f;
    f.channels = meta_.shape.channels;
    f.height = meta_.shape.height;
    f.width = meta_.shape.width;
    f.classes = meta_.classes;
    return f;
  }
  std::string vocab_path() const override { return ""; }
  KeptFile kept_file() const override { return {"data.json", dir_ + "/meta.json"}; }
  std::string fingerprint() const override {
    std::string names;
    for (const std::string& n : meta_.class_names) names += (names.empty() ? "" : ",") + n;
    char norm[64];
    std::snprintf(norm, sizeof norm, "mean %.17g, std %.17g", meta_.mean, meta_.std);
    return "images: " + meta_.shape.text() + ", " + std::to_string(meta_.classes) + " classes (" + names + "), " +
           norm + "; samples train " + std::to_string(meta_.train) + ", valid " + std::to_string(meta_.valid) +
           ", test " + std::to_string(meta_.test);
  }
  std::string unlike_kept(const std::string& kept_bytes, const std::string& kept_path) const override {
    const ImageMeta then = parse_image_meta(kept_bytes, kept_path);
    auto num = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.6g", v);
      return std::string(b);
    };
    if (then.classes != meta_.classes || then.class_names != meta_.class_names)
      return "other classes (" + std::to_string(then.classes) + " then, " + std::to_string(meta_.classes) +
             " in " + dir_ + (then.classes == meta_.classes ? ", named otherwise" : "") + ")";
    if (then.mean != meta_.mean || then.std != meta_.std)
      return "images normalised with mean " + num(then.mean) + ", std " + num(then.std) + " (the images of " + dir_ +
             " with mean " + num(meta_.mean) + ", std " + num(meta_.std) + "; prepare them with --mean " +
             num(then.mean) + " --std " + num(then.std) + " to match)";
    if (!(then.shape == meta_.shape)) return "images of " + then.shape.text() + ", not " + meta_.shape.text();
    return "";
  }
  std::vector<std::string> class_names() const override { return meta_.class_names; }
  std::string note() const override { return ""; }
  std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample,
                                 const WindowOptions&) const override {
    DT_ASSERT(sample.input == InputKind::images && sample.targets == 1);
    require(sample.inputs == meta_.shape.pixels(),
            "the model reads images of " + std::to_string(sample.inputs) + " values, but the images of " + dir_ +
                " are " + meta_.shape.text() + " (" + std::to_string(meta_.shape.pixels()) +
                " values): fit the model to the data");
    const ImageFile& f = name == "train" ? train_ : name == "valid" ? valid_ : test_;
    return std::make_unique<ImageDataset>(f, float(meta_.mean), float(meta_.std));
  }
  std::string row_unit() const override { return "samples"; }
  std::string describe(int64_t n, const SampleShape&) const override {
    return std::to_string(n) + " images of " + meta_.shape.text();
  }

 private:
  ImageFile open_split(const std::string& split, int64_t samples) const {
    const std::string p = dir_ + "/" + split + ".images";
    require(std::filesystem::exists(p), "image data " + dir_ + " has meta.json but no " + split + ".images: prepare it "
                                        "again with " + kPrepareImages);
    ImageFile f(p);
    require(f.shape() == meta_.shape && f.classes() == meta_.classes && f.size() == samples,
            "image file " + p + " holds " + std::to_string(f.size()) + " images of " + f.shape().text() + " in " +
                std::to_string(f.classes()) + " classes, but " + dir_ + "/meta.json says " + std::to_string(samples) +
                " of " + meta_.shape.text() + " in " + std::to_string(meta_.classes) +
                ": the folder mixes two prepares; prepare it again with " + kPrepareImages);
    return f;
  }

  std::string dir_;
  ImageMeta meta_;
  ImageFile train_, valid_, test_;
};

}  // namespace

std::unique_ptr<DataSource> DataSource::open(const std::string& dir, InputKind input) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/train/manifest.json", ec)) {
    require(input == InputKind::tokens, "data " + dir + " holds token shards for a language model, but the model reads "
                                        "images: point data.dir at image data, prepared with " + kPrepareImages);
    return open_shard_source(dir);
  }
  const bool tokens = std::filesystem::exists(dir + "/train.bin", ec);
  const bool images = is_image_meta(dir + "/meta.json");
  if (input == InputKind::images) {
    require(images || !tokens, "data " + dir + " holds token data (train.bin, vocab.txt) for a language model, but "
                               "the model reads images: point data.dir at image data, prepared with " +
                                   kPrepareImages);
    require(images, "data dir " + dir + " has no image data (meta.json, train.images): prepare it with " +
                        kPrepareImages);
    return std::make_unique<ImageSource>(dir);
  }
  if (images && !tokens) {
    const ImageMeta m = read_image_meta(dir + "/meta.json");
    throw Error("data " + dir + " holds images (" + m.shape.text() + ", " + std::to_string(m.classes) +
                " classes) for an image classifier, but the model reads tokens: point data.dir at token data "
                "(`dtrain data builtin --out DIR`, `dtrain data prepare --input TEXT --out DIR`), or choose a "
                "model.kind that reads images");
  }
  return std::make_unique<TokenSource>(dir);
}

}  // namespace dtrain
