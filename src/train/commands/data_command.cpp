// `dtrain data prepare|builtin|fashion-mnist`: a corpus or image files prepared into a data dir.
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "data/idx.hpp"
#include "data/prepare.hpp"
#include "data/prepare_images.hpp"
#include "data/vocab.hpp"
#include "train/commands/commands.hpp"
#include "train/commands/data_shards_command.hpp"

namespace dtrain {

namespace {

// `data prepare --format idx` (or a folder that holds IDX files) and `data fashion-mnist`.
int prepare_images(const std::string& sub, const CommandArgs& a) {
  for (const char* k : {"min-freq", "max-vocab", "valid-fraction", "test-fraction"})
    require(a.get(k).empty(), std::string("--") + k +
                                  " is an option of text data: image data takes --valid-count, "
                                  "--seed, --classes, --mean and --std");
  for (const char* k : {"no-lowercase", "no-eos"})
    require(!a.flag(k), std::string("--") + k +
                            " is an option of text data: image data takes --valid-count, --seed, "
                            "--classes, --mean and --std");
  ImagePrepareOptions o;
  o.out_dir = a.need("out");
  o.valid_count = a.integer("valid-count", o.valid_count, 1, INT64_MAX);
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  require(a.get("mean").empty() == a.get("std").empty(),
          "--mean and --std go together: give both, or neither to "
          "have them computed over the train images");
  o.given_mean_std = !a.get("mean").empty();
  o.mean = a.number("mean", 0.0);
  o.std = a.number("std", 0.0);
  ImageMeta m;
  if (sub == "fashion-mnist") {
    require(a.get("input").empty() && a.get("classes").empty() && a.get("format").empty(),
            "dtrain data fashion-mnist reads " + std::string(kFashionMnistDir) +
                " and takes no --input, --format or "
                "--classes: for other IDX files use `dtrain data prepare --format idx --input DIR`");
    m = prepare_fashion_mnist(o);
  } else {
    o.input = a.need("input");
    o.classes = int(a.integer("classes", 0, 2, kMaxImageClasses));
    m = prepare_idx(o);
  }
  std::printf("%s\n", prepared_images_summary(o.out_dir, m).c_str());
  return 0;
}

}  // namespace

int data_command(int argc, char** argv) {
  require(argc >= 3,
          "usage: dtrain data prepare|builtin|fashion-mnist|verify|tokenize|tokenizer|stage …: see `dtrain --help`");
  const std::string sub = argv[2];
  if (sub == "tokenize" || sub == "tokenizer") return tokenizer_data_command(argc, argv);
  if (sub == "stage") return stage_data_command(argc, argv);
  CommandArgs a = parse_command_args(argc, argv, 3, {"no-lowercase", "no-eos", "bos"},
                                     {"input", "out", "min-freq", "max-vocab", "valid-fraction", "test-fraction",
                                      "format", "valid-count", "seed", "classes", "mean", "std", "tokenizer", "split",
                                      "text-key", "dataset", "workers", "memory-mib", "shard-tokens", "special-tokens",
                                      "docs-by"});
  if (sub == "verify") return verify_shards_command(a);
  if (sub == "prepare" && !a.get("tokenizer").empty()) return prepare_shards_command(a);
  refuse_shard_options(a);
  const std::string format = a.get("format");
  require(format.empty() || format == "text" || format == "idx",
          "--format " + format + ": use text (a corpus) or idx (MNIST-format images)");
  require(format.empty() || sub == "prepare", "--format is an option of `dtrain data prepare`: see `dtrain --help`");
  std::error_code ec;
  const bool idx = sub == "fashion-mnist" ||
                   (sub == "prepare" && (format == "idx" || (format.empty() && !a.get("input").empty() &&
                                                             std::filesystem::is_directory(a.get("input"), ec) &&
                                                             find_idx_files(a.get("input")))));
  if (idx) return prepare_images(sub, a);
  for (const char* k : {"valid-count", "seed", "classes", "mean", "std"})
    require(a.get(k).empty(), std::string("--") + k +
                                  " is an option of image data (--format idx): text takes "
                                  "--valid-fraction and --test-fraction");
  PrepareOptions o;
  o.out_dir = a.need("out");
  o.lowercase = !a.flag("no-lowercase");
  o.eos = !a.flag("no-eos");
  o.min_freq = int(a.integer("min-freq", 1, 1, kMaxCount));
  o.max_vocab = a.integer("max-vocab", 0, 0, kMaxCount);
  o.valid_fraction = a.number("valid-fraction", o.valid_fraction);
  o.test_fraction = a.number("test-fraction", o.test_fraction);
  if (sub == "builtin") {
    check_text_output(o.out_dir);
    const std::string text = o.out_dir + "/text";
    make_builtin_corpus(text);
    o.input = text;
  } else {
    require(sub == "prepare", "unknown command `dtrain data " + sub +
                                  "`: use prepare, builtin, fashion-mnist, verify, tokenize, tokenizer or stage");
    o.input = a.need("input");
  }
  PrepareReport r = prepare_dataset(o);
  std::printf("prepared %s (%s): vocabulary %lld words; tokens train %lld, valid %lld, test %lld\n", o.out_dir.c_str(),
              r.format.c_str(), (long long)r.vocab_size, (long long)r.train_tokens, (long long)r.valid_tokens,
              (long long)r.test_tokens);
  if (r.invalid_utf8 > 0)
    std::fprintf(stderr,
                 "dtrain: warning: %lld invalid UTF-8 sequences read as U+FFFD (the first in %s at byte %lld): "
                 "convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8) if those words matter\n",
                 (long long)r.invalid_utf8, r.invalid_utf8_file.c_str(), (long long)r.invalid_utf8_offset);
  return 0;
}

}  // namespace dtrain
