// Data layer, image side: IDX files (plain and gzip) made here, `data prepare --format idx` and
// `data fashion-mnist`, the image files, the valid cut, normalisation, ImageSource, each bad file.
#include <zlib.h>

#include <cmath>
#include <functional>

#include "core/json.hpp"
#include "data/idx.hpp"
#include "data/image_file.hpp"
#include "data/prepare_images.hpp"
#include "data/source.hpp"
#include "data_test_util.hpp"

namespace {

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xFF), char((v >> 8) & 0xFF), char(v & 0xFF)};
}

// A synthetic IDX set: sample i of a split has rows × cols pixels, the first two its index (i % 256,
// i / 256, so each sample is known by its pixels), the rest (7i + 3p) % 256; its label (i + s) % classes.
struct Synthetic {
  int64_t n_train = 40, n_test = 12, rows = 3, cols = 2;
  int classes = 4;
  uint8_t pixel(int64_t i, int64_t p) const {
    return uint8_t(p == 0 ? i % 256 : p == 1 ? i / 256 : (7 * i + 3 * p) % 256);
  }
  uint8_t label(int64_t i, int split) const { return uint8_t((i + split) % classes); }
  std::string images(int64_t n, uint32_t magic = kIdxImagesMagic) const {
    std::string s = be32(magic) + be32(uint32_t(n)) + be32(uint32_t(rows)) + be32(uint32_t(cols));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < rows * cols; ++p) s += char(pixel(i, p));
    return s;
  }
  std::string labels(int64_t n, int split) const {
    std::string s = be32(kIdxLabelsMagic) + be32(uint32_t(n));
    for (int64_t i = 0; i < n; ++i) s += char(label(i, split));
    return s;
  }
};

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// The four IDX files of `s` in `dir` (plain, or gzip-compressed with .gz names).
void write_idx(const TempDir& d, const std::string& dir, const Synthetic& s, bool gz) {
  fs::create_directories(d / dir);
  const std::string files[4] = {s.images(s.n_train), s.labels(s.n_train, 0), s.images(s.n_test), s.labels(s.n_test, 1)};
  for (int f = 0; f < 4; ++f) {
    const std::string path = d / (dir + "/" + kIdxNames[f]);
    if (gz) write_gz(path + ".gz", files[f]);
    else write_text(path, files[f]);
  }
}

std::string path_of(const TempDir& d, const std::string& dir, int file, bool gz = false) {
  return d / (dir + "/" + kIdxNames[file] + (gz ? ".gz" : ""));
}

ImagePrepareOptions options(const TempDir& d, const std::string& in, const std::string& out, int64_t valid = 10) {
  ImagePrepareOptions o;
  o.input = d / in;
  o.out_dir = d / out;
  o.valid_count = valid;
  return o;
}

// The source index of each sample of an image file (from its first two pixels).
std::vector<int64_t> indices_of(const ImageFile& f) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < f.size(); ++i) out.push_back(f.pixels(i)[0] + 256 * f.pixels(i)[1]);
  return out;
}

std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Idx, ReadsPlainAndGzipAlike) {
  TempDir d;
  Synthetic s;
  write_idx(d, "plain", s, false);
  write_idx(d, "gz", s, true);
  for (bool gz : {false, true}) {
    const std::string dir = gz ? "gz" : "plain";
    IdxImages im = read_idx_images(path_of(d, dir, 0, gz));
    EXPECT_EQ(im.count, 40);
    EXPECT_EQ(im.rows, 3);
    EXPECT_EQ(im.cols, 2);
    ASSERT_EQ(im.pixels.size(), size_t(40 * 6));
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(im.pixels[size_t(i * 6 + p)], s.pixel(i, p));
    IdxLabels lb = read_idx_labels(path_of(d, dir, 3, gz));
    ASSERT_EQ(lb.count, 12);
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(lb.labels[size_t(i)], s.label(i, 1));
    const std::optional<IdxFiles> found = find_idx_files(d / dir);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->test_labels, path_of(d, dir, 3, gz));
  }
  // The dotted spelling (train-images.idx3-ubyte) is found too; a folder of other files is none.
  fs::create_directories(d / "dotted");
  for (int f = 0; f < 4; ++f) {
    std::string name = kIdxNames[f];
    name[name.rfind("-idx")] = '.';
    fs::copy_file(path_of(d, "plain", f), d / ("dotted/" + name));
  }
  ASSERT_TRUE(find_idx_files(d / "dotted"));
  EXPECT_EQ(fs::path(find_idx_files(d / "dotted")->train_images).filename().string(), "train-images.idx3-ubyte");
  fs::create_directories(d / "text");
  write_text(d / "text/a.txt", "");
  EXPECT_FALSE(find_idx_files(d / "text"));
}

TEST(Idx, EachBadFileIsOneLineNamingIt) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, false);
  const std::string images = path_of(d, "in", 0), labels = path_of(d, "in", 1);
  const std::string good_images = read_text(images);

  // Wrong magic: a labels file given as images, and the other way round; not IDX at all.
  expect_error([&] { read_idx_images(labels); },
               labels + " is an IDX labels file (magic 0x00000801), but the images file (magic 0x00000803) was expected");
  expect_error([&] { read_idx_labels(images); }, "is an IDX images file (magic 0x00000803), but the labels file");
  write_text(d / "junk", "PK\x03\x04 a zip file");
  expect_error([&] { read_idx_images(d / "junk"); }, "is not an IDX images file (magic 0x504B0304");
  write_text(d / "floats", be32(0x00000D03) + be32(1) + be32(1) + be32(1) + "abcd");
  expect_error([&] { read_idx_images(d / "floats"); }, "holds values of type 0D");
  write_text(d / "empty", "");
  expect_error([&] { read_idx_images(d / "empty"); }, "is empty");

  // Truncated: the header promises more than there is (plain and gzip).
  write_text(d / "short", good_images.substr(0, good_images.size() - 5));
  expect_error([&] { read_idx_images(d / "short"); },
               "is truncated: its header promises 40 images of 3×2 (256 bytes in all) but it has 251");
  write_gz(d / "short.gz", good_images.substr(0, good_images.size() - 5));
  expect_error([&] { read_idx_images(d / "short.gz"); }, "short.gz is truncated");
  write_text(d / "header_only", good_images.substr(0, 10));
  expect_error([&] { read_idx_images(d / "header_only"); }, "less than its 16-byte header");

  // Trailing garbage.
  write_text(d / "long", good_images + "xyz");
  expect_error([&] { read_idx_images(d / "long"); }, "has 3 bytes of trailing garbage after the 40 images of 3×2");

  // A damaged gzip stream (bytes changed inside), and one cut short.
  write_gz(d / "good.gz", good_images);
  std::string gz = read_text(d / "good.gz");
  std::string damaged = gz;
  for (size_t i = 20; i < 30 && i < damaged.size() - 8; ++i) damaged[i] = char(~damaged[i]);
  write_text(d / "damaged.gz", damaged);
  const std::string msg = error_text([&] { read_idx_images(d / "damaged.gz"); });
  EXPECT_NE(msg.find(d / "damaged.gz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("damaged gzip stream"), std::string::npos) << msg;
  write_text(d / "cut.gz", gz.substr(0, gz.size() - 6));  // the data whole, the checksum trailer cut
  expect_error([&] { read_idx_images(d / "cut.gz"); }, "is a cut gzip stream");

  // Missing: the file, and the names looked for in a folder.
  expect_error([&] { read_idx_images(d / "nope"); }, "cannot read IDX images file " + d / "nope" + ": no such file");
  fs::remove(path_of(d, "in", 3));
  expect_error([&] { find_idx_files(d / "in"); }, "but no t10k-labels-idx1-ubyte[.gz]");
}

TEST(PrepareImages, WritesSplitsMetaAndReadsBackExactly) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, true);
  ImagePrepareOptions o = options(d, "in", "out", 10);
  o.seed = 7;
  const ImageMeta m = prepare_idx(o);
  EXPECT_EQ(m.shape, (ImageShape{1, 3, 2}));
  EXPECT_EQ(m.classes, 4);  // the largest train label + 1
  EXPECT_EQ(m.train, 30);
  EXPECT_EQ(m.valid, 10);
  EXPECT_EQ(m.test, 12);
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  const std::string line = prepared_images_summary("OUT", m);
  EXPECT_TRUE(line.starts_with("prepared OUT (idx): images 1×3×2, 4 classes; samples train 30, valid 10, test 12; "
                               "normalised with mean 0.")) << line;
  EXPECT_TRUE(line.ends_with(" (computed over train)")) << line;

  // meta.json: every key, read back the same.
  const Json j = parse_json(read_text(d / "out/meta.json"), "meta.json");
  for (const char* k : {"format", "version", "channels", "height", "width", "classes", "class_names", "mean", "std",
                        "normalization", "samples", "files", "source", "valid_cut"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["format"], "images");
  EXPECT_EQ(j["valid_cut"]["seed"], 7);
  EXPECT_EQ(j["valid_cut"]["count"], 10);
  EXPECT_EQ(j["source"]["format"], "idx");
  EXPECT_EQ(j["source"]["files"][0], "train-images-idx3-ubyte.gz");
  const ImageMeta back = read_image_meta(d / "out/meta.json");
  EXPECT_EQ(back.shape, m.shape);
  EXPECT_EQ(back.mean, m.mean);
  EXPECT_EQ(back.std, m.std);
  EXPECT_EQ(back.valid_seed, 7u);

  // The valid cut: the first 10 of the seeded permutation, disjoint from train, together all 40,
  // each part in file order, every pixel and label as in the source.
  const ImageFile train(d / "out/train.images"), valid(d / "out/valid.images"), test(d / "out/test.images");
  const std::vector<int64_t> ti = indices_of(train), vi = indices_of(valid);
  std::vector<int64_t> perm;
  DistributedSampler::permutation(40, 7, 0, perm, DistributedSampler::kValidCutPurpose);
  std::vector<int64_t> expect_valid(perm.begin(), perm.begin() + 10);
  std::sort(expect_valid.begin(), expect_valid.end());
  EXPECT_EQ(vi, expect_valid);
  EXPECT_TRUE(std::is_sorted(ti.begin(), ti.end()));
  std::set<int64_t> all(ti.begin(), ti.end());
  all.insert(vi.begin(), vi.end());
  EXPECT_EQ(all.size(), 40u);
  std::vector<int64_t> first_ten(10);
  std::iota(first_ten.begin(), first_ten.end(), int64_t(0));
  EXPECT_NE(vi, first_ten);  // not biased by file order
  for (const auto* f : {&train, &valid})
    for (int64_t k = 0; k < f->size(); ++k) {
      const int64_t i = indices_of(*f)[size_t(k)];
      for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(f->pixels(k)[p], s.pixel(i, p));
      EXPECT_EQ(f->label(k), s.label(i, 0));
    }
  for (int64_t i = 0; i < 12; ++i) {
    for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(test.pixels(i)[p], s.pixel(i, p));
    EXPECT_EQ(test.label(i), s.label(i, 1));
  }

  // Normalisation: mean and population std of the train split's pixels / 255.
  double sum = 0, sq = 0;
  for (int64_t k = 0; k < train.size(); ++k)
    for (int64_t p = 0; p < 6; ++p) sum += train.pixels(k)[p] / 255.0;
  const double mean = sum / (30 * 6);
  for (int64_t k = 0; k < train.size(); ++k)
    for (int64_t p = 0; p < 6; ++p) sq += std::pow(train.pixels(k)[p] / 255.0 - mean, 2);
  EXPECT_NEAR(m.mean, mean, 1e-12);
  EXPECT_NEAR(m.std, std::sqrt(sq / (30 * 6)), 1e-12);

  // The same seed cuts the same valid split, byte for byte; another seed another one.
  prepare_idx(o);
  ImagePrepareOptions o2 = options(d, "in", "again", 10);
  o2.seed = 7;
  prepare_idx(o2);
  EXPECT_EQ(read_text(d / "again/valid.images"), read_text(d / "out/valid.images"));
  EXPECT_EQ(read_text(d / "again/train.images"), read_text(d / "out/train.images"));
  ImagePrepareOptions o3 = options(d, "in", "seed8", 10);
  o3.seed = 8;
  prepare_idx(o3);
  EXPECT_NE(indices_of(ImageFile(d / "seed8/valid.images")), vi);
}

TEST(PrepareImages, PlainAndGzipGiveTheSameFiles) {
  TempDir d;
  Synthetic s;
  write_idx(d, "plain", s, false);
  write_idx(d, "gz", s, true);
  prepare_idx(options(d, "plain", "a"));
  prepare_idx(options(d, "gz", "b"));
  for (const char* f : {"train.images", "valid.images", "test.images"})
    EXPECT_EQ(read_text(d / (std::string("a/") + f)), read_text(d / (std::string("b/") + f))) << f;
}

TEST(ImageSource, SamplesAreNormalisedPixelsAndLabels) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, false);
  ImagePrepareOptions o = options(d, "in", "out");
  o.given_mean_std = true;
  o.mean = 0.25;
  o.std = 0.5;
  const ImageMeta m = prepare_idx(o);
  EXPECT_EQ(m.mean, 0.25);
  EXPECT_EQ(read_image_meta(d / "out/meta.json").normalization.substr(0, 5), "given");

  const auto src = DataSource::open(d / "out", InputKind::images);
  const DataFacts f = src->facts();
  EXPECT_EQ(f.vocab_size, 0);
  EXPECT_EQ(f.channels, 1);
  EXPECT_EQ(f.height, 3);
  EXPECT_EQ(f.width, 2);
  EXPECT_EQ(f.classes, 4);
  EXPECT_EQ(src->vocab_path(), "");
  EXPECT_EQ(src->row_unit(), "samples");
  const SampleShape shape{InputKind::images, 6, 1};
  EXPECT_EQ(src->describe(1000, shape), "1000 images of 1×3×2");
  const auto test = src->split("test", shape, {});
  EXPECT_EQ(test->size(), 12);
  EXPECT_EQ(test->shape(), shape);
  std::vector<float> px(6);
  int32_t label = -1;
  for (int64_t i = 0; i < 12; ++i) {
    test->get(i, px.data(), &label);
    EXPECT_EQ(label, s.label(i, 1));
    for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(px[size_t(p)], (float(s.pixel(i, p)) / 255.0f - 0.25f) / 0.5f) << i;
  }
  EXPECT_EQ(src->split("train", shape, {})->size(), 30);
  EXPECT_EQ(src->split("valid", shape, {})->size(), 10);

  // Through the loader: a batch of pixels and labels.
  const auto valid = src->split("valid", shape, {});
  DistributedSampler sampler(valid->size(), false, 0);
  BatchLoader loader(*valid, sampler, 4, false, false);
  loader.start_epoch();
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.pixels.size(), 24u);
  EXPECT_EQ(b.targets.size(), 4u);
  EXPECT_TRUE(b.tokens.empty());

  // A model of another image size: one line.
  expect_error([&] { src->split("train", SampleShape{InputKind::images, 32 * 32, 1}, {}); },
               "the model reads images of 1024 values, but the images of " + d / "out" + " are 1×3×2 (6 values)");
}

TEST(ImageSource, DataOfTheOtherKindIsOneLine) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, false);
  prepare_idx(options(d, "in", "images"));
  write_text(d / "text.txt", "one two three\n\nfour five six\n\nseven eight nine\n\nten\n");
  PrepareOptions t;
  t.input = d / "text.txt";
  t.out_dir = d / "tokens";
  prepare_dataset(t);
  expect_error([&] { DataSource::open(d / "tokens", InputKind::images); },
               "holds token data (train.bin, vocab.txt) for a language model, but the model reads images");
  expect_error([&] { DataSource::open(d / "images", InputKind::tokens); },
               "holds images (1×3×2, 4 classes) for an image classifier, but the model reads tokens");
  expect_error([&] { DataSource::open(d / "nothing", InputKind::images); }, "has no image data (meta.json");
  // Preparing one kind into a folder of the other is refused.
  expect_error([&] { prepare_idx(options(d, "in", "tokens")); }, "holds token data (train.bin)");
  t.out_dir = d / "images";
  expect_error([&] { prepare_dataset(t); }, "holds image data (meta.json)");
}

TEST(ImageSource, DamagedOrMixedFilesAreOneLine) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, false);
  prepare_idx(options(d, "in", "out"));
  std::string bytes = read_text(d / "out/valid.images");
  bytes[kImageFileHeaderBytes + 3] ^= 1;
  write_text(d / "out/valid.images", bytes);
  expect_error([&] { DataSource::open(d / "out", InputKind::images); },
               "valid.images is damaged: its pixels and labels do not match the checksum");
  write_text(d / "out/valid.images", bytes.substr(0, bytes.size() - 1));
  expect_error([&] { ImageFile f(d / "out/valid.images"); }, "is truncated");
  // valid.images of another prepare (another count) beside this meta.json.
  prepare_idx(options(d, "in", "other", 5));
  fs::copy_file(d / "other/valid.images", d / "out/valid.images", fs::copy_options::overwrite_existing);
  expect_error([&] { DataSource::open(d / "out", InputKind::images); }, "the folder mixes two prepares");
  prepare_idx(options(d, "in", "out"));
  fs::remove(d / "out/test.images");
  expect_error([&] { DataSource::open(d / "out", InputKind::images); }, "has meta.json but no test.images");
}

TEST(PrepareImages, BadInputsAreOneLine) {
  TempDir d;
  Synthetic s;
  write_idx(d, "in", s, false);
  const std::string train_images = read_text(path_of(d, "in", 0)), train_labels = read_text(path_of(d, "in", 1));

  // Counts that disagree between images and labels.
  write_text(path_of(d, "in", 1), s.labels(39, 0));
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "holds 40 images but " + path_of(d, "in", 1) +
                                                                  " holds 39 labels");
  write_text(path_of(d, "in", 1), train_labels);

  // Labels files swapped with images (wrong magic), truncated data.
  write_text(path_of(d, "in", 0), train_labels);
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "is an IDX labels file (magic 0x00000801)");
  write_text(path_of(d, "in", 0), train_images.substr(0, 100));
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "is truncated");
  write_text(path_of(d, "in", 0), train_images);

  // Labels out of range: given --classes, and a test label past train's largest.
  ImagePrepareOptions few = options(d, "in", "out");
  few.classes = 3;
  expect_error([&] { prepare_idx(few); }, "holds label 3 at sample 3, outside the 3 classes (0..2)");
  std::string test_labels = s.labels(12, 1);
  test_labels[8 + 3] = 4;  // train's labels go up to 3
  write_text(path_of(d, "in", 3), test_labels);
  expect_error([&] { prepare_idx(options(d, "in", "out")); },
               path_of(d, "in", 3) + " holds label 4 at sample 3, outside the 4 classes (0..3): the train labels go up to 3");
  // One class only.
  Synthetic one = s;
  one.classes = 1;
  write_text(path_of(d, "in", 1), one.labels(40, 0));
  write_text(path_of(d, "in", 3), one.labels(12, 1));
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "holds only label 0: a classifier needs at least 2 classes");
  write_text(path_of(d, "in", 1), train_labels);
  write_text(path_of(d, "in", 3), s.labels(12, 1));

  // Test images of another size.
  Synthetic big = s;
  big.rows = 4;
  write_text(path_of(d, "in", 2), big.images(12));
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "holds images of 4×2 but");
  write_text(path_of(d, "in", 2), s.images(12));

  // A valid cut that leaves no train sample; missing files; no IDX files at all.
  expect_error([&] { prepare_idx(options(d, "in", "out", 40)); }, "--valid-count 40 does not fit the 40 train samples");
  expect_error([&] { prepare_idx(options(d, "in", "out", 0)); }, "give from 1 to 39");
  fs::remove(path_of(d, "in", 1));
  expect_error([&] { prepare_idx(options(d, "in", "out")); }, "but no train-labels-idx1-ubyte[.gz]");
  fs::create_directories(d / "empty");
  expect_error([&] { prepare_idx(options(d, "empty", "out")); },
               "holds none of train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
               "t10k-labels-idx1-ubyte");
  EXPECT_FALSE(fs::exists(d / "out/meta.json"));
}

TEST(PrepareImages, FashionMnistNamesAndMissingPackage) {
  TempDir d;
  Synthetic s;
  s.classes = 10;
  write_idx(d, "fashion", s, true);
  ImagePrepareOptions o;
  o.out_dir = d / "out";
  o.valid_count = 4;
  const ImageMeta m = prepare_fashion_mnist(o, d / "fashion");
  EXPECT_EQ(m.dataset, "Fashion-MNIST");
  EXPECT_EQ(m.class_names, fashion_mnist_classes());
  EXPECT_EQ(m.class_names[0], "T-shirt/top");
  EXPECT_EQ(m.class_names[9], "Ankle boot");
  EXPECT_EQ(read_image_meta(d / "out/meta.json").class_names, fashion_mnist_classes());
  EXPECT_TRUE(prepared_images_summary("X", m).starts_with("prepared X (Fashion-MNIST, idx): images 1×3×2, 10 classes"));
  expect_error([&] { prepare_fashion_mnist(o, d / "not-installed"); }, "apt-get install dataset-fashion-mnist");
}
