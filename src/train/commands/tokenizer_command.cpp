// `dtrain data tokenize` (a text's ids, or ids' text, as a tokenizer sees them) and `dtrain data
// tokenizer train` (a SentencePiece model trained on the user's text).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/input_file.hpp"
#include "core/output_path.hpp"
#include "data/tokenizer/sentencepiece_tokenizer.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "train/commands/commands.hpp"

namespace dtrain {

namespace {

std::string ids_json(const std::vector<uint32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

// A line of --decode input: a JSON array of ids.
std::vector<uint32_t> parse_ids(const std::string& text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  require(j.is_array(), where + " is not a JSON array of token ids: write e.g. [15496,995]");
  std::vector<uint32_t> ids;
  for (const auto& v : j) {
    require(v.is_number_unsigned() && v.get<uint64_t>() <= UINT32_MAX,
            where + " holds " + v.dump() + ", not a token id (a whole number ≥ 0)");
    ids.push_back(uint32_t(v.get<uint64_t>()));
  }
  return ids;
}

// One input (--text, or a line of --input) tokenized or decoded, printed on its own line.
void tokenize_one(const Tokenizer& tok, const std::string& text, bool decode, SpecialText special,
                  const std::string& where) {
  if (decode) {
    const std::string out = tok.decode(parse_ids(text, where));
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::vector<uint32_t> ids;
  tok.encode(text, ids, special);
  std::printf("%s\n", ids_json(ids).c_str());
}

int tokenize(const CommandArgs& a) {
  const auto tok = Tokenizer::load(a.need("tokenizer"));
  const SpecialText special = parse_special_text(a.get("special-tokens", "text"));
  const bool decode = a.flag("decode");
  require(a.get("text").empty() != a.get("input").empty() || (a.opts.count("text") == 1 && a.get("input").empty()),
          "dtrain data tokenize takes --text STRING or --input FILE (one line each), not both");
  if (a.opts.count("text")) {
    tokenize_one(*tok, a.get("text"), decode, special, "--text");
    return 0;
  }
  const std::string path = a.need("input");
  std::string bytes = read_file(path, kMaxWholeFileBytes, "input file");
  size_t start = 0;
  for (int64_t line = 1; start < bytes.size(); ++line) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    tokenize_one(*tok, bytes.substr(start, end - start), decode, special, path + " line " + std::to_string(line));
    start = end + 1;
  }
  return 0;
}

// Every regular file under the --input paths (folders recursively, sorted; hidden files skipped).
std::vector<std::string> input_files(const CommandArgs& a) {
  std::vector<std::string> files;
  auto [lo, hi] = a.opts.equal_range("input");
  for (auto it = lo; it != hi; ++it) {
    const std::string& in = it->second;
    require(std::filesystem::exists(in), "--input " + in + " does not exist");
    if (!std::filesystem::is_directory(in)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::recursive_directory_iterator(in))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  require(!files.empty(), "tokenizer train needs --input FILE or FOLDER (text, one sentence or paragraph per line)");
  return files;
}

int train_tokenizer(const CommandArgs& a) {
  const std::string kind = a.get("kind", "sentencepiece");
  require(kind == "sentencepiece", "--kind " + kind + ": dtrain trains sentencepiece tokenizers (BPE or unigram); "
                                   "a byte-level BPE tokenizer.json or tiktoken file is used as given");
  SentencePieceTrainOptions o;
  o.inputs = input_files(a);
  o.out = a.need("out");
  check_output_file(o.out, "--out");
  if (std::filesystem::exists(o.out)) {  // replaced only when it is a SentencePiece model (an earlier training)
    bool model = false;
    try {
      model = Tokenizer::load(o.out)->kind() == "sentencepiece";
    } catch (const Error&) {
    }
    require(model, "--out " + o.out + " is there and is not a SentencePiece model: choose another name, or move it away");
  }
  o.model_type = a.get("model-type", o.model_type);
  o.vocab_size = a.integer("vocab-size", o.vocab_size, 16, kMaxCount);
  o.byte_fallback = !a.flag("no-byte-fallback");
  o.character_coverage = a.number("character-coverage", o.character_coverage);
  require(o.character_coverage > 0 && o.character_coverage <= 1, "--character-coverage must be in (0, 1]");
  o.max_sentences = a.integer("max-sentences", o.max_sentences, 0, kMaxCount);
  o.threads = int(a.integer("threads", 0, 0, 4096));
  o.seed = uint64_t(a.integer("seed", 1, 0, INT64_MAX));
  train_sentencepiece(o);
  const auto tok = Tokenizer::load(o.out);
  std::printf("trained %s: %s\n", o.out.c_str(), tok->describe().c_str());
  return 0;
}

}  // namespace

int tokenizer_data_command(int argc, char** argv) {
  const std::string sub = argv[2];
  if (sub == "tokenize")
    return tokenize(parse_command_args(argc, argv, 3, {"decode"}, {"tokenizer", "text", "input", "special-tokens"}));
  require(argc >= 4 && std::string(argv[3]) == "train",
          "usage: dtrain data tokenizer train --input TEXT --vocab-size N --out FILE.model");
  return train_tokenizer(parse_command_args(
      argc, argv, 4, {"no-byte-fallback"},
      {"kind", "input", "out", "model-type", "vocab-size", "character-coverage", "max-sentences", "threads", "seed"}));
}

}  // namespace dtrain
