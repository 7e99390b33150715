// Classifying images with a trained classifier (model.kind = cnn, or any kind whose metric is
// accuracy): the confusion matrix of a split (`dtrain eval`) and the classes of new images from an
// IDX or raw file (`dtrain predict`), normalised as the checkpoint's data was (its data.json).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "nn/model.hpp"

namespace dtrain {

struct Confusion {
  int64_t classes = 0;
  std::vector<int64_t> counts;  // [true class × classes + predicted class]
  int64_t right() const;        // the diagonal's sum
  int64_t total() const;
};

// Every sample of `data` through the model in batches (no dropout): its true against its predicted
// class (the highest score; a tie goes to the lower class, as argmax does).
Confusion confusion_matrix(Model& model, const Dataset& data, int64_t batch_size, Precision precision);
// The matrix as text: a row per true class, a column per predicted one, headed by `names` (class
// numbers when empty), and each class's recall.
std::string confusion_text(const Confusion& c, const std::vector<std::string>& names);

struct PredictOptions {
  std::string checkpoint;
  std::string input;          // IDX images (plain or .gz) or raw bytes: images of C×H×W uint8 pixels
  std::string format = "auto";  // idx, raw or auto (IDX when the file starts with its magic)
  int64_t top = 1;            // classes listed per image, most likely first
  int64_t batch_size = 64;
  Precision precision = Precision::f32;
};

// Prints one line per image to `out`: its index and its top classes with their probabilities. Error
// naming the problem for a checkpoint that is not a classifier's or keeps no data.json, and for an
// input whose images are not the model's size.
void predict_images(const PredictOptions& o, std::FILE* out);

}  // namespace dtrain
