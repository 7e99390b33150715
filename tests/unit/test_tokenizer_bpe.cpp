// Byte-level BPE (data/tokenizer): tiny tokenizer.json and tiktoken files written here, with ids
// worked out by hand; the long-piece heap against a plain reference; added and special tokens in
// both modes; bytes that are not UTF-8; a megabyte of spaces; files dtrain refuses.
#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "data/tokenizer/byte_alphabet.hpp"
#include "data/tokenizer/byte_pair_encoder.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "data_test_util.hpp"

namespace {

using Ids = std::vector<uint32_t>;
using JsonObject = nlohmann::json;

// Ids 0-255: the single bytes (id = byte value), so that a byte's id is the byte.
constexpr uint32_t a = 'a', b = 'b', c = 'c', d = 'd', space = ' ';

Ids encode(const Tokenizer& tok, const std::string& text, SpecialText mode = SpecialText::text) {
  Ids ids;
  tok.encode(text, ids, mode);
  return ids;
}

Ids bytes_as_ids(const std::string& text) {
  Ids ids;
  for (const char ch : text) ids.push_back(static_cast<unsigned char>(ch));
  return ids;
}

// A tokenizer.json whose vocabulary is the 256 bytes (id = byte) and, from 256 on, one token per
// merge in the order given (merge i makes token 256 + i), plus `extra` tokens after those.
struct TinyJson {
  std::vector<std::pair<std::string, std::string>> merges = {{"a", "b"}, {"b", "c"}, {"ab", "c"}, {"a", "a"}};
  std::vector<std::string> extra;  // unreachable by merges
  JsonObject pre_tokenizer = nullptr;
  JsonObject added_tokens = JsonObject::array();
  bool ignore_merges = false;

  JsonObject tree() const {
    JsonObject vocab = JsonObject::object();
    for (int byte = 0; byte < 256; ++byte) vocab[alphabet_text_of_bytes(std::string(1, char(byte)))] = byte;
    JsonObject merge_list = JsonObject::array();
    uint32_t next = 256;
    for (const auto& [left, right] : merges) {
      vocab[alphabet_text_of_bytes(left + right)] = next++;
      merge_list.push_back(JsonObject::array({alphabet_text_of_bytes(left), alphabet_text_of_bytes(right)}));
    }
    for (const std::string& token : extra) vocab[alphabet_text_of_bytes(token)] = next++;
    JsonObject model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                        {"byte_fallback", false}, {"ignore_merges", ignore_merges},
                        {"vocab", vocab}, {"merges", merge_list}};
    return {{"version", "1.0"}, {"added_tokens", added_tokens}, {"normalizer", nullptr},
            {"pre_tokenizer", pre_tokenizer}, {"post_processor", nullptr}, {"decoder", nullptr}, {"model", model}};
  }
  std::unique_ptr<Tokenizer> load(const TempDir& dir, const std::string& name = "tokenizer.json") const {
    write_text(dir / name, tree().dump());
    return Tokenizer::load(dir / name);
  }
};

JsonObject added(uint32_t id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
          {"normalized", !special}, {"special", special}};
}

JsonObject byte_level(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

JsonObject split(const std::string& kind, const std::string& pattern) {
  return {{"type", "Split"}, {"pattern", {{kind, pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// Expects loading `path` to fail with one line naming the file and containing `needle`.
void expect_refused(const std::string& path, const std::string& needle) {
  expect_error([&] { Tokenizer::load(path); }, needle);
  expect_error([&] { Tokenizer::load(path); }, path);
}

}  // namespace

TEST(ByteAlphabet, GptTwoSpellings) {
  EXPECT_EQ(alphabet_text_of_bytes(" "), "\u0120");   // Ġ
  EXPECT_EQ(alphabet_text_of_bytes("\n"), "\u010A");  // Ċ
  EXPECT_EQ(alphabet_text_of_bytes("!~"), "!~");
  EXPECT_EQ(alphabet_text_of_bytes("\xAD"), "\u0143");  // the first byte after 0x7F-0xA0: 33 + 34 places on
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all += char(byte);
  EXPECT_EQ(bytes_of_alphabet_text(alphabet_text_of_bytes(all)), all);
  EXPECT_FALSE(bytes_of_alphabet_text(" ").has_value());       // a raw space is outside the alphabet
  EXPECT_FALSE(bytes_of_alphabet_text("\u4E2D").has_value());  // so is CJK
  EXPECT_FALSE(bytes_of_alphabet_text("\xC1\xA1").has_value());  // overlong 'a'
}

TEST(TokenizerJson, MergesByRankLeftmostFirst) {
  TempDir dir;
  const auto tok = TinyJson{}.load(dir);  // ab 256 (rank 0), bc 257, abc 258, aa 259 (rank 3)
  EXPECT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(encode(*tok, "abc"), (Ids{258}));           // ab (rank 0) before bc (rank 1), then ab+c
  EXPECT_EQ(encode(*tok, "bcab"), (Ids{257, 256}));
  EXPECT_EQ(encode(*tok, "cab"), (Ids{c, 256}));
  EXPECT_EQ(encode(*tok, "aaa"), (Ids{259, a}));        // a tie: the leftmost pair merges
  EXPECT_EQ(encode(*tok, "aaaa"), (Ids{259, 259}));
  EXPECT_EQ(encode(*tok, "abcd"), (Ids{258, d}));
  EXPECT_EQ(encode(*tok, ""), Ids{});
  TinyJson bc_first;
  bc_first.merges = {{"b", "c"}, {"a", "b"}, {"ab", "c"}};  // bc 256 (rank 0), ab 257, abc 258
  EXPECT_EQ(encode(*bc_first.load(dir, "bc_first.json"), "abc"), (Ids{a, 256}));  // a+bc is no merge
  EXPECT_EQ(tok->decode(Ids{258, 32, 259}), "abc aa");
  EXPECT_TRUE(tok->exact_decode());
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_EQ(tok->bos_id(), -1);
  expect_error([&] { tok->decode(Ids{260}); }, dir / "tokenizer.json");
}

TEST(TokenizerJson, MergesAsStrings) {
  TempDir dir;
  JsonObject tree = TinyJson{}.tree();
  JsonObject strings = JsonObject::array();
  for (const auto& pair : tree["model"]["merges"]) strings.push_back(pair[0].get<std::string>() + " " + pair[1].get<std::string>());
  tree["model"]["merges"] = strings;
  write_text(dir / "t.json", tree.dump());
  EXPECT_EQ(encode(*Tokenizer::load(dir / "t.json"), "abcaaa"), (Ids{258, 259, a}));
}

TEST(TokenizerJson, IgnoreMergesTakesWholePieces) {
  TempDir dir;
  TinyJson spec;
  spec.extra = {"abd"};  // id 260: no merge makes it
  EXPECT_EQ(encode(*spec.load(dir), "abd"), (Ids{256, d}));
  spec.ignore_merges = true;
  const auto tok = spec.load(dir);
  EXPECT_EQ(encode(*tok, "abd"), (Ids{260}));
  EXPECT_EQ(encode(*tok, "abdabd"), (Ids{256, d, 256, d}));  // not itself a token: merged as usual
}

TEST(TokenizerJson, PreTokenizers) {
  TempDir dir;
  TinyJson spec;
  spec.pre_tokenizer = byte_level(false, true);  // GPT-2's regex
  EXPECT_EQ(encode(*spec.load(dir), "ab ab"), (Ids{256, space, 256}));  // "ab", " ab"
  EXPECT_EQ(encode(*spec.load(dir), "ab's"), (Ids{256, '\'', 's'}));
  spec.pre_tokenizer = byte_level(true, true);
  auto tok = spec.load(dir);
  EXPECT_EQ(encode(*tok, "ab"), (Ids{space, 256}));
  EXPECT_EQ(encode(*tok, " ab"), (Ids{space, 256}));
  EXPECT_FALSE(tok->exact_decode());
  spec.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split("String", "."), byte_level(false, false)}}};
  EXPECT_EQ(encode(*spec.load(dir), "ab.ab"), (Ids{256, '.', 256}));
  EXPECT_EQ(encode(*spec.load(dir), "abxab"), (Ids{256, 'x', 256}));  // "." is a literal dot
  spec.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split("Regex", "\\d+"), byte_level(false, false)}}};
  EXPECT_EQ(encode(*spec.load(dir), "ab12ab"), (Ids{256, '1', '2', 256}));
  spec.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split("Regex", "\\d"), byte_level(true, false)}}};
  EXPECT_EQ(encode(*spec.load(dir), "ab1"), (Ids{space, 256, space, '1'}));  // a space before each piece
  spec.pre_tokenizer = split("String", "b");
  EXPECT_EQ(encode(*spec.load(dir), "abc"), (Ids{a, b, c}));
}

TEST(TokenizerJson, AddedTokensInBothModes) {
  TempDir dir;
  TinyJson spec;  // ids 256-259 from merges
  spec.added_tokens = {added(300, "<|endoftext|>", true), added(301, "<x>", false), added(302, "<x>y", false)};
  const auto tok = spec.load(dir);
  EXPECT_EQ(tok->vocab_size(), 303);
  EXPECT_EQ(tok->eos_id(), 300);
  EXPECT_EQ(tok->describe(), "byte-level BPE (tokenizer.json) of 303 tokens, <|endoftext|> 300");
  const std::string text = "a<|endoftext|>b<x>c<x>yz";
  EXPECT_EQ(encode(*tok, text, SpecialText::special), (Ids{a, 300, b, 301, c, 302, 'z'}));  // longest at a place
  Ids plain = bytes_as_ids("a<|endoftext|>b");  // a special token's spelling is plain text; the others still match
  plain.insert(plain.end(), {301, c, 302, 'z'});
  EXPECT_EQ(encode(*tok, text, SpecialText::text), plain);
  EXPECT_EQ(tok->decode(encode(*tok, text, SpecialText::special)), text);
  EXPECT_EQ(encode(*tok, "<|endoftext|><|endoftext|>", SpecialText::special), (Ids{300, 300}));
}

TEST(TokenizerJson, AddedTokenStripsWordsAndPasses) {
  TempDir dir;
  TinyJson spec;
  JsonObject mask = added(303, "<m>", true);
  mask["lstrip"] = mask["rstrip"] = true;
  JsonObject word = added(304, "tok", false);
  word["single_word"] = true;
  // <|endoftext|> (special, not normalized) is found in the first pass, before <|endoftext|>ish
  // (normalized) in the second: the longer one matches only where the first pass found nothing.
  spec.added_tokens = {mask, word, added(300, "<|endoftext|>", true), added(305, "<|endoftext|>ish", false)};
  const auto tok = spec.load(dir);
  EXPECT_EQ(encode(*tok, "a  <m>\t b", SpecialText::special), (Ids{a, 303, b}));
  EXPECT_EQ(encode(*tok, "a  <m>\t b", SpecialText::text), bytes_as_ids("a  <m>\t b"));
  EXPECT_EQ(encode(*tok, "tok tok."), (Ids{304, space, 304, '.'}));
  EXPECT_EQ(encode(*tok, "atok tok_"), bytes_as_ids("atok tok_"));  // a word character touches it
  EXPECT_EQ(encode(*tok, "<|endoftext|>ish", SpecialText::special), (Ids{300, 'i', 's', 'h'}));
  EXPECT_EQ(encode(*tok, "<|endoftext|>ish", SpecialText::text), (Ids{305}));
}

TEST(TokenizerJson, BytesThatAreNotUtf8RoundTrip) {
  TempDir dir;
  TinyJson spec;
  spec.pre_tokenizer = byte_level(false, true);
  const auto tok = spec.load(dir);
  // "ab" and " c" match GPT-2's regex; the bytes between and after are pieces of their own
  const std::string text = "ab\xff\xfe c\x80";
  EXPECT_EQ(encode(*tok, text), (Ids{256, 0xff, 0xfe, space, c, 0x80}));
  spec.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {split("Regex", "\\p{L}+"), byte_level(false, false)}}};
  const auto split_tok = spec.load(dir, "split.json");
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string random(rng() % 64, '\0');
    for (char& ch : random) ch = char(rng() % 4 == 0 ? 'a' + rng() % 3 : rng() % 256);
    EXPECT_EQ(tok->decode(encode(*tok, random)), random);
    EXPECT_EQ(split_tok->decode(encode(*split_tok, random, SpecialText::special)), random);
  }
}

TEST(TokenizerJson, MegabyteOfSpaces) {
  TempDir dir;
  TinyJson spec;
  spec.merges = {{" ", " "}, {"  ", "  "}, {"    ", "    "}};  // 2, 4 and 8 spaces: 256, 257, 258
  spec.pre_tokenizer = byte_level(false, true);
  const auto tok = spec.load(dir);
  const size_t n = size_t(1) << 20;
  Ids ids = encode(*tok, std::string(n, ' '));  // one piece
  EXPECT_EQ(ids, Ids(n / 8, 258));
  // "x", then all but one space (\s+(?!\S)), then " y": 2^20-1 spaces merge pairwise from the left
  // at each rank, leaving 8s and then one 4, one 2 and one 1
  const std::string text = "x" + std::string(n, ' ') + "y";
  ids = encode(*tok, text);
  Ids want = {'x'};
  want.insert(want.end(), n / 8 - 1, 258);
  want.insert(want.end(), {257, 256, space, space, 'y'});
  EXPECT_EQ(ids, want);
  EXPECT_EQ(tok->decode(ids), text);
}

// The heap for long pieces against a plain reference (repeatedly merge the leftmost lowest-ranked
// pair), on random text over a four-letter alphabet with random merges.
TEST(BytePairEncoder, LongPiecesMergeAsShortOnes) {
  std::mt19937 rng(11);
  BpeVocabulary vocab;
  vocab.token_bytes.resize(256);
  for (int byte = 0; byte < 256; ++byte) vocab.token_bytes[byte] = std::string(1, char(byte));
  std::map<std::pair<uint32_t, uint32_t>, PairMerge> merges;
  for (uint32_t rank = 0; rank < 60; ++rank) {
    const uint32_t left = rng() % 2 ? 'a' + rng() % 4 : 256 + rng() % std::max<uint32_t>(1, rank);
    const uint32_t right = rng() % 2 ? 'a' + rng() % 4 : 256 + rng() % std::max<uint32_t>(1, rank);
    if (left >= vocab.token_bytes.size() || right >= vocab.token_bytes.size() || merges.count({left, right})) continue;
    merges[{left, right}] = {rank, uint32_t(vocab.token_bytes.size())};
    vocab.merges.set(left, right, merges[{left, right}]);
    vocab.token_bytes.push_back(vocab.token_bytes[left] + vocab.token_bytes[right]);
  }
  const BytePairEncoder encoder(vocab);
  auto reference = [&](const std::string& piece) {
    Ids ids = bytes_as_ids(piece);
    for (;;) {
      size_t best = ids.size();
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const auto m = merges.find({ids[i], ids[i + 1]});
        if (m != merges.end() && (best == ids.size() || m->second.rank < merges.at({ids[best], ids[best + 1]}).rank))
          best = i;
      }
      if (best == ids.size()) return ids;
      ids[best] = merges.at({ids[best], ids[best + 1]}).merged_id;
      ids.erase(ids.begin() + long(best) + 1);
    }
  };
  for (int i = 0; i < 200; ++i) {
    std::string piece(1 + rng() % 700, 'a');
    for (char& ch : piece) ch = char('a' + rng() % 4);
    Ids ids;
    encoder.encode(piece, ids);
    ASSERT_EQ(ids, reference(piece)) << piece.size() << " bytes";
  }
}

TEST(TokenizerJson, SharedByThreads) {
  TempDir dir;
  TinyJson spec;
  spec.pre_tokenizer = byte_level(false, true);
  spec.added_tokens = {added(300, "<|endoftext|>", true)};
  const auto tok = spec.load(dir);
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(std::string(i * 40, 'a') + " abc<|endoftext|>" + std::to_string(i) + "\xff");
  std::vector<Ids> want;
  for (const auto& t : texts) want.push_back(encode(*tok, t, SpecialText::special));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) wrong += encode(*tok, texts[i], SpecialText::special) != want[i];
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
}

TEST(TokenizerJson, RefusedFiles) {
  TempDir dir;
  auto refuse = [&](const std::string& name, const std::function<void(JsonObject&)>& edit, const std::string& needle) {
    JsonObject tree = TinyJson{}.tree();
    edit(tree);
    write_text(dir / name, tree.dump());
    expect_refused(dir / name, needle);
  };
  refuse("wordpiece.json", [](JsonObject& t) { t["model"]["type"] = "WordPiece"; }, "model.type \"WordPiece\"");
  refuse("dropout.json", [](JsonObject& t) { t["model"]["dropout"] = 0.1; }, "model.dropout 0.1");
  refuse("prefix.json", [](JsonObject& t) { t["model"]["continuing_subword_prefix"] = "##"; }, "continuing_subword_prefix");
  refuse("suffix.json", [](JsonObject& t) { t["model"]["end_of_word_suffix"] = "</w>"; }, "end_of_word_suffix");
  refuse("fallback.json", [](JsonObject& t) { t["model"]["byte_fallback"] = true; }, "model.byte_fallback");
  refuse("nfc.json", [](JsonObject& t) { t["normalizer"] = {{"type", "NFC"}}; }, "normalizer \"NFC\"");
  refuse("whitespace.json", [](JsonObject& t) { t["pre_tokenizer"] = {{"type", "Whitespace"}}; },
         "pre_tokenizer.type \"Whitespace\"");
  refuse("removed.json", [](JsonObject& t) { t["pre_tokenizer"] = split("Regex", "a"); t["pre_tokenizer"]["behavior"] = "Removed"; },
         "behavior \"Removed\"");
  refuse("bad_regex.json", [](JsonObject& t) { t["pre_tokenizer"] = split("Regex", "(a"); }, "does not compile");
  refuse("merge.json", [](JsonObject& t) { t["model"]["merges"].push_back({"zz", "q"}); }, "model.merges[4]");
  refuse("byte.json", [](JsonObject& t) { t["model"]["vocab"].erase("A"); }, "0x41");
  write_text(dir / "broken.json", "{\"model\": ");
  expect_refused(dir / "broken.json", "not valid JSON");
}

namespace {

// A tiktoken rank file of `count` ranks: the 256 bytes (rank = byte), then ab, bc, abc, abd, then
// three-byte fillers starting with 0x01, 0x02, … (never in the texts below).
std::string rank_file(size_t count) {
  std::vector<std::string> tokens;
  for (int byte = 0; byte < 256; ++byte) tokens.push_back(std::string(1, char(byte)));
  for (const char* t : {"ab", "bc", "abc", "abd"}) tokens.push_back(t);
  for (int i = 0; tokens.size() < count; ++i) tokens.push_back({char(1 + i / 65536), char(i / 256 % 256), char(i % 256)});
  auto base64 = [](const std::string& bytes) {
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
      if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
      if (i + 2 < bytes.size()) v |= uint8_t(bytes[i + 2]);
      out += {digits[v >> 18], digits[v >> 12 & 63], i + 1 < bytes.size() ? digits[v >> 6 & 63] : '=',
              i + 2 < bytes.size() ? digits[v & 63] : '='};
    }
    return out;
  };
  std::string file;
  for (size_t rank = 0; rank < tokens.size(); ++rank) file += base64(tokens[rank]) + " " + std::to_string(rank) + "\n";
  return file;
}

std::string replace_line(const std::string& file, size_t number, const std::string& line) {
  size_t start = 0;
  for (size_t i = 1; i < number; ++i) start = file.find('\n', start) + 1;
  return file.substr(0, start) + line + file.substr(file.find('\n', start));
}

}  // namespace

TEST(Tiktoken, GptTwoSize) {
  TempDir dir;
  write_text(dir / "gpt2.tiktoken", rank_file(50256));
  const auto tok = Tokenizer::load(dir / "gpt2.tiktoken");
  EXPECT_EQ(tok->kind(), "tiktoken");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(tok->describe(), "byte-level BPE (tiktoken gpt2) of 50257 tokens, <|endoftext|> 50256");
  EXPECT_EQ(encode(*tok, "abc abc"), (Ids{258, space, 258}));  // "abc", " abc"
  EXPECT_EQ(encode(*tok, "bcab"), (Ids{257, 256}));
  EXPECT_EQ(encode(*tok, "abdd"), (Ids{259, d}));  // ab+d: every two tokens that make a token merge
  // a whole piece that is a token is that token, though no merge reaches the filler 01 00 00 (rank 260)
  EXPECT_EQ(encode(*tok, std::string("\x01\x00\x00", 3)), (Ids{260}));
  EXPECT_EQ(encode(*tok, std::string("\x01\x00\x00\x00", 4)), (Ids{1, 0, 0, 0}));
  EXPECT_EQ(encode(*tok, "x<|endoftext|>", SpecialText::special), (Ids{'x', 50256}));
  EXPECT_EQ(encode(*tok, "x<|endoftext|>"), bytes_as_ids("x<|endoftext|>"));
  EXPECT_EQ(tok->decode(Ids{258, 50256}), "abc<|endoftext|>");
  const std::string spaces(size_t(1) << 20, ' ');
  EXPECT_EQ(encode(*tok, spaces), Ids(spaces.size(), space));  // no merges of spaces: one id per byte
}

TEST(Tiktoken, KnownSizesNameTheirSpecialTokens) {
  TempDir dir;
  write_text(dir / "llama3.model", rank_file(128000));
  const auto llama = Tokenizer::load(dir / "llama3.model");
  EXPECT_EQ(llama->vocab_size(), 128256);
  EXPECT_EQ(llama->bos_id(), 128000);
  EXPECT_EQ(llama->eos_id(), 128001);
  EXPECT_EQ(encode(*llama, "<|start_header_id|><|eot_id|><|reserved_special_token_250|>", SpecialText::special),
            (Ids{128006, 128009, 128255}));
  EXPECT_EQ(encode(*llama, "AB'S", SpecialText::special), (Ids{'A', 'B', '\'', 'S'}));
  EXPECT_EQ(llama->describe(), "byte-level BPE (tiktoken Llama 3) of 128256 tokens, <|begin_of_text|> 128000, "
                               "<|end_of_text|> 128001");
  write_text(dir / "cl100k.tiktoken", rank_file(100256));
  const auto cl100k = Tokenizer::load(dir / "cl100k.tiktoken");
  EXPECT_EQ(cl100k->vocab_size(), 100277);
  EXPECT_EQ(encode(*cl100k, "<|fim_prefix|><|endofprompt|>", SpecialText::special), (Ids{100258, 100276}));
  write_text(dir / "o200k.tiktoken", rank_file(199998));
  const auto o200k = Tokenizer::load(dir / "o200k.tiktoken");
  EXPECT_EQ(o200k->eos_id(), 199999);
  EXPECT_EQ(o200k->vocab_size(), 200019);
}

TEST(Tiktoken, RefusedFiles) {
  TempDir dir;
  const std::string good = rank_file(50256);
  auto refuse = [&](const std::string& name, const std::string& file, const std::string& needle) {
    write_text(dir / name, file);
    expect_refused(dir / name, needle);
  };
  refuse("small.tiktoken", rank_file(300), "300 ranks");
  refuse("small2.tiktoken", rank_file(300), "tokenizer.json");
  refuse("base64.tiktoken", replace_line(good, 7, "Bg=x 6"), "line 7: Bg=x is not base64");
  refuse("twice.tiktoken", replace_line(good, 9, "CA== 7"), "line 9: rank 7 is given twice");
  refuse("range.tiktoken", replace_line(good, 9, "CA== 50256"), "line 9: rank 50256 is not below");
  refuse("same.tiktoken", replace_line(good, 9, "Bw== 8"), "line 9: the same token as line 8");
  refuse("byte.tiktoken", replace_line(good, 0x42, "/wAA 65"), "0x41");  // the byte 'A' (rank 65) missing
  refuse("rank.tiktoken", replace_line(good, 12, "Cw== x"), "line 12: the rank is not a number");
}
