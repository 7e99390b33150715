// `dtrain data prepare --format idx` and `dtrain data fashion-mnist`: reads the four IDX files, cuts
// valid from train by a seeded shuffle, computes the normalisation, writes the image files and meta.json.
#include "data/prepare_images.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "core/output_path.hpp"
#include "data/idx.hpp"
#include "data/sampler.hpp"

namespace dtrain {

namespace fs = std::filesystem;

namespace {

void make_image_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("cannot create output folder " + dir + " (" + (ec ? ec.message() : "not a folder") +
                "): choose a writable output folder");
}

std::string looked_for() {
  std::string s;
  for (const char* n : kIdxNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s + " (each plain or .gz, also with a dot before idx)";
}

// Images and the labels that go with them, read and checked as a pair.
struct IdxSplit {
  IdxImages images;
  IdxLabels labels;
};

IdxSplit read_pair(const std::string& images_path, const std::string& labels_path) {
  IdxSplit s{read_idx_images(images_path), read_idx_labels(labels_path)};
  require(s.images.count == s.labels.count,
          "IDX files disagree: " + images_path + " holds " + std::to_string(s.images.count) + " images but " +
              labels_path + " holds " + std::to_string(s.labels.count) +
              " labels: give the labels file that belongs to these images");
  require(s.images.count > 0, "IDX images file " + images_path + " holds no images: give a file with some");
  return s;
}

// The first label >= classes: Error naming the file, the sample and the fix.
void check_labels(const IdxLabels& l, int classes, const std::string& fix) {
  for (int64_t i = 0; i < l.count; ++i)
    if (l.labels[size_t(i)] >= classes)
      throw Error("IDX labels file " + l.path + " holds label " + std::to_string(l.labels[size_t(i)]) + " at sample " +
                  std::to_string(i) + ", outside the " + std::to_string(classes) + " classes (0.." +
                  std::to_string(classes - 1) + "): " + fix);
}

std::string four_places(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace

namespace {

// The options and the folders checked before anything is read: the IDX files found in the input.
IdxFiles check_idx_request(const ImagePrepareOptions& o) {
  require(!o.input.empty(), "no input given: pass a folder of IDX files with --input");
  require(!o.out_dir.empty(), "no output folder given: pass one with --out");
  std::error_code ec;
  require(fs::is_directory(o.input, ec), "IDX input " + o.input + " is not a folder: pass the folder that holds " +
                                             looked_for() + " with --input");
  const std::optional<IdxFiles> files = find_idx_files(o.input);
  require(files.has_value(), "IDX folder " + o.input + " holds none of " + looked_for() +
                                 ": point --input at an MNIST-format folder (or leave out --format idx for text)");
  {
    std::error_code ec2;
    require(!fs::equivalent(o.input, o.out_dir, ec2),
            "output folder " + o.out_dir + " is the input folder: write the prepared data to another folder");
  }
  require(!fs::exists(fs::path(o.out_dir) / "train.bin", ec),
          "output folder " + o.out_dir + " holds token data (train.bin): prepare the images into another folder");
  check_output_folder(o.out_dir, "dtrain data prepare", holds_only({"train.images", "valid.images", "test.images",
                                                                    "meta.json"}));
  require(o.classes >= 0 && o.classes <= kMaxImageClasses,
          "--classes " + std::to_string(o.classes) + " is outside 1.." + std::to_string(kMaxImageClasses) +
              ": give the number of classes (labels are 0 to classes - 1)");
  require(!o.given_mean_std || (std::isfinite(o.mean) && std::isfinite(o.std) && o.std > 0),
          "--mean " + std::to_string(o.mean) + " --std " + std::to_string(o.std) +
              " cannot normalise pixels: give a finite mean and a std > 0 (of pixels scaled to [0, 1])");
  return *files;
}

// Classes inferred from the largest train label: every class below it must occur, or one damaged
// label (200 among 0..9) would silently make a 201-way classifier; test labels must fall within.
int infer_classes(const IdxSplit& train, const IdxSplit& test) {
  const int classes = 1 + *std::max_element(train.labels.labels.begin(), train.labels.labels.end());
  std::vector<int64_t> seen(size_t(classes), 0);
  for (const uint8_t l : train.labels.labels) ++seen[l];
  const int64_t missing = std::count(seen.begin(), seen.end(), 0);
  if (missing > 0) {
    const auto lone = std::find(seen.begin(), seen.end(), 0) - seen.begin();
    throw Error("IDX labels file " + train.labels.path + " has labels up to " + std::to_string(classes - 1) + " but " +
                std::to_string(missing) + " of the classes below never occur (the first: " + std::to_string(lone) +
                "): a damaged label? Give --classes with the true number of classes (a "
                "label outside it is then named), or check the file");
  }
  check_labels(test.labels, classes,
               "the train labels go up to " + std::to_string(classes - 1) + "; give --classes " +
                   "with the true number if test holds classes train lacks, or check the files");
  return classes;
}

// Classes: given (every label checked against them), or the largest train label + 1.
int count_classes(const ImagePrepareOptions& o, const IdxSplit& train, const IdxSplit& test) {
  int classes = o.classes;
  if (classes == 0) {
    classes = infer_classes(train, test);
  } else {
    const std::string fix = "give --classes with the true number of classes, or check the files";
    check_labels(train.labels, classes, fix);
    check_labels(test.labels, classes, fix);
  }
  require(classes >= 2, "IDX labels file " + train.labels.path + " holds only label 0: a classifier needs at least "
                        "2 classes; give --classes N if the data has more, or check the file");
  return classes;
}

// The classes' names: the data set's own (as many as the classes), or their numbers.
std::vector<std::string> name_classes(const ImagePrepareOptions& o, int classes) {
  std::vector<std::string> names = o.class_names;
  if (names.empty())
    for (int c = 0; c < classes; ++c) names.push_back(std::to_string(c));
  require(int(names.size()) == classes,
          "IDX folder " + o.input + " has " + std::to_string(classes) + " classes, but " + o.dataset + " has " +
              std::to_string(names.size()) + ": it is not " + o.dataset + "; prepare it with `dtrain data prepare "
              "--format idx`");
  return names;
}

// The train file's samples split in two, each part in file order: [0] train, [1] valid.
struct TrainValid {
  std::vector<uint8_t> pixels[2], labels[2];
};

// The valid cut: the first valid_count of a seeded permutation. Frees the train images' pixels.
TrainValid cut_valid(const ImagePrepareOptions& o, IdxSplit& train, size_t pixels_per_image) {
  const int64_t n = train.images.count;
  require(o.valid_count >= 1 && o.valid_count < n,
          "--valid-count " + std::to_string(o.valid_count) + " does not fit the " + std::to_string(n) +
              " train samples of " + train.images.path + ": give from 1 to " + std::to_string(n - 1) +
              " (the valid split is cut from train)");
  std::vector<int64_t> perm;
  DistributedSampler::permutation(n, o.seed, 0, perm, DistributedSampler::kValidCutPurpose);
  std::vector<char> is_valid(size_t(n), 0);
  for (int64_t k = 0; k < o.valid_count; ++k) is_valid[size_t(perm[size_t(k)])] = 1;

  const size_t P = pixels_per_image;
  TrainValid tv;
  for (int s = 0; s < 2; ++s) {
    const size_t count = size_t(s == 1 ? o.valid_count : n - o.valid_count);
    tv.pixels[s].reserve(count * P);
    tv.labels[s].reserve(count);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int s = is_valid[size_t(i)];
    const uint8_t* src = train.images.pixels.data() + size_t(i) * P;
    tv.pixels[s].insert(tv.pixels[s].end(), src, src + P);
    tv.labels[s].push_back(train.labels.labels[size_t(i)]);
  }
  train.images.pixels = {};  // the source's copy is no longer needed
  return tv;
}

// The normalisation: given, or exact over the train split's pixels (a histogram of the byte
// values, then sums in double).
void set_normalization(ImageMeta& m, const ImagePrepareOptions& o, const std::vector<uint8_t>& train_pixels,
                       const std::string& train_path) {
  if (o.given_mean_std) {
    m.mean = o.mean;
    m.std = o.std;
    m.normalization = "given (--mean, --std); the loader feeds (pixel / 255 - mean) / std";
    return;
  }
  std::array<int64_t, 256> hist{};
  for (uint8_t v : train_pixels) ++hist[v];
  const double N = double(train_pixels.size());
  double sum = 0;
  for (int v = 0; v < 256; ++v) sum += double(hist[size_t(v)]) * (v / 255.0);
  m.mean = sum / N;
  double sq = 0;
  for (int v = 0; v < 256; ++v) sq += double(hist[size_t(v)]) * (v / 255.0 - m.mean) * (v / 255.0 - m.mean);
  m.std = std::sqrt(sq / N);
  require(m.std > 0, "the train images of " + train_path + " are all one value: nothing to learn from; check "
                     "the file (or give --mean and --std)");
  m.normalization = "computed over the train split's pixels scaled to [0, 1] (after the valid cut); the loader "
                    "feeds (pixel / 255 - mean) / std";
}

// Where the data came from and how the valid split was cut.
void set_source(ImageMeta& m, const ImagePrepareOptions& o, const IdxFiles& files) {
  m.dataset = o.dataset;
  m.source_format = "idx";
  m.source_dir = fs::absolute(o.input).lexically_normal().string();
  for (const std::string& f : {files.train_images, files.train_labels, files.test_images, files.test_labels})
    m.source_files.push_back(fs::path(f).filename().string());
  m.valid_count = o.valid_count;
  m.valid_seed = o.seed;
}

}  // namespace

ImageMeta prepare_idx(const ImagePrepareOptions& o) {
  const IdxFiles files = check_idx_request(o);
  IdxSplit train = read_pair(files.train_images, files.train_labels);
  IdxSplit test = read_pair(files.test_images, files.test_labels);
  require(test.images.rows == train.images.rows && test.images.cols == train.images.cols,
          "IDX files disagree: " + test.images.path + " holds images of " + std::to_string(test.images.rows) + "×" +
              std::to_string(test.images.cols) + " but " + train.images.path + " of " +
              std::to_string(train.images.rows) + "×" + std::to_string(train.images.cols) +
              ": give train and test files of one data set");
  const int classes = count_classes(o, train, test);
  std::vector<std::string> names = name_classes(o, classes);
  const ImageShape shape{1, train.images.rows, train.images.cols};
  const TrainValid tv = cut_valid(o, train, size_t(shape.pixels()));

  ImageMeta m;
  m.shape = shape;
  m.classes = classes;
  m.class_names = names;
  set_normalization(m, o, tv.pixels[0], train.images.path);
  m.train = int64_t(tv.labels[0].size());
  m.valid = int64_t(tv.labels[1].size());
  m.test = test.images.count;
  set_source(m, o, files);

  make_image_dir(o.out_dir);
  const fs::path out(o.out_dir);
  write_image_file((out / "train.images").string(), shape, classes, tv.pixels[0], tv.labels[0]);
  write_image_file((out / "valid.images").string(), shape, classes, tv.pixels[1], tv.labels[1]);
  write_image_file((out / "test.images").string(), shape, classes, test.images.pixels, test.labels.labels);
  write_image_meta((out / "meta.json").string(), m);  // last: a folder with it is complete
  return m;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

ImageMeta prepare_fashion_mnist(ImagePrepareOptions o, const std::string& source_dir) {
  std::error_code ec;
  require(fs::is_directory(source_dir, ec),
          "Fashion-MNIST is not installed (no folder " + source_dir +
              "): install Debian's package with `apt-get install dataset-fashion-mnist`, or prepare a copy of the IDX "
              "files with `dtrain data prepare --format idx --input DIR --out OUT`");
  o.input = source_dir;
  o.class_names = fashion_mnist_classes();
  o.dataset = "Fashion-MNIST";
  return prepare_idx(o);
}

std::string prepared_images_summary(const std::string& out_dir, const ImageMeta& m) {
  return "prepared " + out_dir + " (" + (m.dataset.empty() ? "" : m.dataset + ", ") + m.source_format +
         "): images " + m.shape.text() + ", " + std::to_string(m.classes) + " classes; samples train " +
         std::to_string(m.train) + ", valid " + std::to_string(m.valid) + ", test " + std::to_string(m.test) +
         "; normalised with mean " + four_places(m.mean) + ", std " + four_places(m.std) +
         (m.normalization.rfind("given", 0) == 0 ? " (given)" : " (computed over train)");
}

}  // namespace dtrain
