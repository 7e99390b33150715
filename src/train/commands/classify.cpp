// Confusion matrices and predictions (see classify.hpp).
#include "train/commands/classify.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/idx.hpp"
#include "data/image_file.hpp"
#include "data/loader.hpp"
#include "data/sampler.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/commands/checkpoint_model.hpp"

namespace dtrain {

namespace {

int64_t argmax(const float* v, int64_t n) { return int64_t(std::max_element(v, v + n) - v); }

// "PNG" when the file starts as an encoded picture does (never raw pixels), else "".
std::string picture_format(const std::string& path) {
  const int fd = open_regular_file(path, "image file");
  unsigned char h[8] = {};
  const ssize_t n = ::pread(fd, h, sizeof h, 0);
  ::close(fd);
  if (n >= 8 && std::memcmp(h, "\x89PNG\r\n\x1a\n", 8) == 0) return "PNG";
  if (n >= 3 && h[0] == 0xFF && h[1] == 0xD8 && h[2] == 0xFF) return "JPEG";
  if (n >= 6 && (std::memcmp(h, "GIF87a", 6) == 0 || std::memcmp(h, "GIF89a", 6) == 0)) return "GIF";
  return "";
}

// The images of an input file as uint8 pixels, sample-major; count set.
std::vector<uint8_t> read_images(const PredictOptions& o, const ImageShape& shape, int64_t& count) {
  require(std::filesystem::is_regular_file(o.input), "--input " + o.input + " is not a file: give IDX images "
                                                     "(e.g. t10k-images-idx3-ubyte.gz) or raw bytes");
  if (const std::string picture = picture_format(o.input); !picture.empty())
    throw Error("--input " + o.input + " is a " + picture + " picture, which dtrain predict does not decode: give IDX "
                "images or raw uint8 pixels (e.g. convert " + o.input + " -resize " + std::to_string(shape.width) +
                "x" + std::to_string(shape.height) + "! -depth 8 " + (shape.channels == 1 ? "gray" : "rgb") +
                ":image.raw)");
  std::string format = o.format;
  if (format == "auto") {
    try {
      read_idx_images(o.input);
      format = "idx";
    } catch (const Error&) {
      format = "raw";
    }
    bool labels = false;  // the labels of a data set given for its images: say so, not "not whole images"
    if (format == "raw") try {
        read_idx_labels(o.input);
        labels = true;
      } catch (const Error&) {
      }
    require(!labels, o.input + " is an IDX labels file: give the images file (…-images-idx3-ubyte)");
  }
  if (format == "idx") {
    IdxImages idx = read_idx_images(o.input);
    require(shape.channels == 1 && idx.rows == shape.height && idx.cols == shape.width,
            o.input + " holds " + std::to_string(idx.rows) + "×" + std::to_string(idx.cols) +
                " images, the model reads " + shape.text() + ": give images of the size it was trained on");
    count = idx.count;
    return std::move(idx.pixels);
  }
  require(format == "raw", "--format " + format + ": use idx, raw or auto");
  std::ifstream in(o.input, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int64_t per = shape.pixels();
  require(!bytes.empty() && int64_t(bytes.size()) % per == 0,
          o.input + ": " + std::to_string(bytes.size()) + " bytes are not whole images of " + shape.text() +
              " = " + std::to_string(per) + " bytes (raw input: uint8 pixels, channel by row by column, image after "
              "image): give IDX images or raw bytes of that size");
  count = int64_t(bytes.size()) / per;
  return bytes;
}

}  // namespace

int64_t Confusion::right() const {
  int64_t s = 0;
  for (int64_t c = 0; c < classes; ++c) s += counts[size_t(c * classes + c)];
  return s;
}

int64_t Confusion::total() const { return std::accumulate(counts.begin(), counts.end(), int64_t(0)); }

Confusion confusion_matrix(Model& model, const Dataset& data, int64_t batch_size, Precision precision) {
  const int64_t K = model.outputs();
  Confusion c{K, std::vector<int64_t>(size_t(K * K), 0)};
  DistributedSampler sampler(data.size(), false, 0, 1, 0, false, /*pad=*/false);
  BatchLoader loader(data, sampler, batch_size, false);
  loader.start_epoch();
  Batch b;
  std::vector<float> scores(size_t(batch_size * K));
  while (loader.next(b)) {
    StepContext ctx;
    ctx.B = b.samples;
    ctx.T = 1;
    ctx.precision = precision;
    model.predict(b.view(), ctx, scores.data());
    for (int64_t i = 0; i < b.samples; ++i) {
      const int64_t truth = b.targets[size_t(i)];
      DT_ASSERT(truth >= 0 && truth < K);
      ++c.counts[size_t(truth * K + argmax(scores.data() + i * K, K))];
    }
  }
  return c;
}

std::string confusion_text(const Confusion& c, const std::vector<std::string>& names) {
  const int64_t K = c.classes;
  auto name = [&](int64_t k) {
    std::string n = size_t(k) < names.size() ? names[size_t(k)] : std::to_string(k);
    return n.size() > 11 ? n.substr(0, 11) : n;
  };
  char cell[32];
  std::string out = "confusion matrix (a row per true class, a column per predicted class):\n";
  std::snprintf(cell, sizeof cell, "%-12s", "");
  out += cell;
  for (int64_t k = 0; k < K; ++k) {
    std::snprintf(cell, sizeof cell, " %11s", name(k).c_str());
    out += cell;
  }
  out += "      recall\n";
  for (int64_t t = 0; t < K; ++t) {
    std::snprintf(cell, sizeof cell, "%-12s", name(t).c_str());
    out += cell;
    int64_t row = 0;
    for (int64_t p = 0; p < K; ++p) {
      const int64_t n = c.counts[size_t(t * K + p)];
      row += n;
      std::snprintf(cell, sizeof cell, " %11lld", (long long)n);
      out += cell;
    }
    std::snprintf(cell, sizeof cell, " %10.2f%%\n", row > 0 ? 100.0 * double(c.counts[size_t(t * K + t)]) / double(row) : 0.0);
    out += cell;
  }
  return out;
}

void predict_images(const PredictOptions& o, std::FILE* out) {
  const CheckpointModel cm(o.checkpoint);
  const ModelKind& kind = cm.kind;
  const SampleShape& sample = cm.sample;
  require(sample.input == InputKind::images && kind.metric() == Metric::accuracy,
          "checkpoint " + o.checkpoint + " is a " + cm.config.kind + " model, not an image classifier: `dtrain predict` "
          "classifies images (use `dtrain generate` for a language model)");
  const std::string meta_path = o.checkpoint + "/data.json";
  require(std::filesystem::exists(meta_path),
          "checkpoint " + o.checkpoint + " keeps no data.json (the normalisation and class names of its data): use a "
          "checkpoint written by `dtrain train` on image data");
  const ImageMeta meta = parse_image_meta(read_checkpoint_file(o.checkpoint, "data.json"), meta_path);  // checked
  require(meta.shape.pixels() == sample.inputs, "checkpoint " + o.checkpoint + ": its data.json describes " +
                                                    meta.shape.text() + " images, not the model's input");
  int64_t count = 0;
  const std::vector<uint8_t> pixels = read_images(o, meta.shape, count);
  const int64_t B = std::min(o.batch_size, count), I = sample.inputs;
  const std::unique_ptr<Model> loaded = cm.load(B);
  Model& model = *loaded;
  const int64_t K = model.outputs(), top = std::min(o.top, K);
  std::vector<float> in(size_t(B * I)), scores(size_t(B * K));
  float table[256];  // the loader's normalisation
  for (int v = 0; v < 256; ++v) table[v] = float((double(v) / 255.0 - meta.mean) / meta.std);
  for (int64_t first = 0; first < count; first += B) {
    const int64_t n = std::min(B, count - first);
    for (int64_t i = 0; i < n * I; ++i) in[size_t(i)] = table[pixels[size_t(first * I + i)]];
    StepContext ctx;
    ctx.B = n;
    ctx.T = 1;
    ctx.precision = o.precision;
    model.predict({sample, n, in.data(), nullptr}, ctx, scores.data());
    for (int64_t i = 0; i < n; ++i) {
      float* s = scores.data() + i * K;
      const float mx = *std::max_element(s, s + K);
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += std::exp(double(s[k] - mx));
      std::vector<int64_t> order(static_cast<size_t>(K));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
      std::fprintf(out, "%lld:", (long long)(first + i));
      for (int64_t t = 0; t < top; ++t) {
        const int64_t k = order[size_t(t)];
        const std::string name = size_t(k) < meta.class_names.size() ? meta.class_names[size_t(k)] : std::to_string(k);
        std::fprintf(out, "%s %lld %s (p %.4f)", t ? "," : "", (long long)k, name.c_str(),
                     std::exp(double(s[k] - mx)) / sum);
      }
      std::fprintf(out, "\n");
    }
  }
}

}  // namespace dtrain
