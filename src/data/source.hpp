// A run's data: data.dir opened for the input a model reads (token files, or image files), its
// splits as Datasets of that model's samples, and what the data says the model must fit (a language
// model's vocabulary, a classifier's image size and classes). The trainer and `dtrain eval` open
// data only through this, so a new input kind is added here, in src/data, not in the trainer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace dtrain {

// What the data says a model must fit; the fields of the other input kind are 0.
struct DataFacts {
  int64_t vocab_size = 0;  // token data: words in its vocabulary
  // Image data: one image's channels, height and width (the sample is channels × height × width
  // float pixels, normalised), and how many classes the labels index (labels 0 .. classes - 1).
  int64_t channels = 0, height = 0, width = 0;
  int64_t classes = 0;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  // data.dir for models reading `input`: a folder of `dtrain data prepare --tokenizer` (token shards)
  // or of `dtrain data prepare` / `dtrain data builtin` (word-level token files) for tokens,
  // of `dtrain data prepare --format idx` or `dtrain data fashion-mnist` (image files) for images.
  // Error naming what is missing and how to make it, or what the folder holds when it is data of
  // the other kind.
  static std::unique_ptr<DataSource> open(const std::string& dir, InputKind input);

  virtual const std::string& dir() const = 0;
  virtual DataFacts facts() const = 0;
  // The vocabulary a model of this data indexes (token data: vocab.txt); "" when none (image data).
  virtual std::string vocab_path() const = 0;
  // The file the checkpoints keep beside the model, under its name there: token data's vocab.txt;
  // image data's meta.json as data.json (its normalisation and class names, which classifying new
  // images needs).
  // Image data: each class's name (meta.json's class_names); token data: none.
  virtual std::vector<std::string> class_names() const { return {}; }
  struct KeptFile {
    std::string name, path;
  };
  virtual KeptFile kept_file() const = 0;
  // Why a model whose checkpoint kept `kept_bytes` (a copy of some data's kept_file, read from
  // `kept_path`) would not read this data as it was trained: another vocabulary; images normalised
  // with another mean or std, or other classes. "" when it would.
  virtual std::string unlike_kept(const std::string& kept_bytes, const std::string& kept_path) const = 0;
  // What identifies the data to the model, in one line that ranks compare (their copies may lie in
  // different folders): the vocabulary's checksum and the split sizes; the images' shape, classes,
  // normalisation and counts. Not a checksum of every token (gigabytes).
  virtual std::string fingerprint() const = 0;
  // A note on data that could not be checked in full (token files of an older dtrain), or "".
  virtual std::string note() const = 0;
  // Split `name` (train, valid or test) as samples of `sample`; token data cuts it into windows as
  // `windows` says; image data ignores it.
  virtual std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample,
                                         const WindowOptions& windows) const = 0;
  // A mix's sources (data.mix), by name, and each one's split alone (for validation per source);
  // empty for data of one folder.
  virtual std::vector<std::string> part_names() const { return {}; }
  virtual std::vector<std::unique_ptr<Dataset>> split_parts(const std::string&, const SampleShape&,
                                                            const WindowOptions&) const {
    return {};
  }
  // What a row of the loss is, in words: "tokens" (a classifier's data: "samples").
  virtual std::string row_unit() const = 0;
  // What `n` samples of `sample` are, in words ("1000 windows of 32 tokens", "1000 images of 1×28×28").
  virtual std::string describe(int64_t n, const SampleShape& sample) const = 0;
};

}  // namespace dtrain
