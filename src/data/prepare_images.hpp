// `dtrain data prepare --format idx` and `dtrain data fashion-mnist`: IDX files into a folder of
// packed image files (train; valid, cut from train by a seeded shuffle; test) and its meta.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_file.hpp"

namespace dtrain {

struct ImagePrepareOptions {
  std::string input;    // a folder of IDX files (data/idx.hpp: kIdxNames)
  std::string out_dir;  // created when missing
  int64_t valid_count = 5000;  // samples cut from train into valid (at least 1, fewer than train's)
  uint64_t seed = 1;           // of the valid cut's shuffle
  int classes = 0;             // 0: the largest train label + 1
  bool given_mean_std = false;  // mean and std below, else computed over the train split's pixels
  double mean = 0, std = 0;
  std::vector<std::string> class_names;  // one per class; empty: "0", "1", …
  std::string dataset;                   // recorded in meta.json ("Fashion-MNIST"; "" when unknown)
};

// Writes out_dir/{train,valid,test}.images and, last, out_dir/meta.json; returns what meta.json
// says. Normalisation computed here is over the train split's pixels scaled to [0, 1], after the
// valid cut: mean, and std over all of them (population). Error (one line: the file, the problem,
// the fix) for missing or bad IDX files, images and labels whose counts disagree, train and test
// images of different sizes, labels outside the classes, a valid cut that leaves no train samples.
ImageMeta prepare_idx(const ImagePrepareOptions& o);

// Where Debian's package dataset-fashion-mnist puts the IDX files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Fashion-MNIST's ten class names, by label.
const std::vector<std::string>& fashion_mnist_classes();
// prepare_idx of `source_dir` with Fashion-MNIST's class names; Error naming `apt-get install
// dataset-fashion-mnist` when the folder is not there.
ImageMeta prepare_fashion_mnist(ImagePrepareOptions o, const std::string& source_dir = kFashionMnistDir);

// The line `dtrain data` prints for a prepared folder.
std::string prepared_images_summary(const std::string& out_dir, const ImageMeta& m);

}  // namespace dtrain
