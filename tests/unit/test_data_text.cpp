// Data layer, text side: vocabulary, token files, `prepare` (WikiText and plain text) and the
// built-in corpus.
#include "core/crc32c.hpp"
#include "data_test_util.hpp"

TEST(Vocab, OrderByCountThenAlphabetical) {
  auto v = Vocabulary::build({"b a c a b a", "", "z y"});
  ASSERT_EQ(v.size(), 7);
  EXPECT_EQ(v.word(0), "<unk>");
  EXPECT_EQ(v.word(1), "<eos>");
  EXPECT_EQ(v.word(2), "a");
  EXPECT_EQ(v.word(3), "b");
  EXPECT_EQ(v.word(4), "c");  // c, y, z all once: alphabetical
  EXPECT_EQ(v.word(5), "y");
  EXPECT_EQ(v.word(6), "z");
  EXPECT_EQ(v.count(2), 3);
  EXPECT_EQ(v.count(1), 2);  // two non-empty lines
  EXPECT_EQ(v.id("b"), 3u);
}

TEST(Vocab, LowercaseAndUnicode) {
  auto v = Vocabulary::build({"The the THE Ébène ΑΒΓ Жук"});
  EXPECT_EQ(v.word(2), "the");
  EXPECT_EQ(v.count(2), 3);
  EXPECT_EQ(v.id("ThE"), 2u);
  EXPECT_NE(v.id("ébène"), 0u);
  EXPECT_EQ(v.id("ÉBÈNE"), v.id("ébène"));
  EXPECT_NE(v.id("αβγ"), 0u);
  EXPECT_NE(v.id("жук"), 0u);
  EXPECT_EQ(lowercase_utf8("ŁÓDŹ Ÿ"), "łódź ÿ");

  VocabOptions keep;
  keep.lowercase = false;
  auto k = Vocabulary::build({"The the THE"}, keep);
  EXPECT_EQ(k.size(), 5);
  EXPECT_NE(k.id("The"), k.id("the"));
  EXPECT_EQ(k.id("tHe"), 0u);
}

TEST(Vocab, EosAndUnk) {
  auto v = Vocabulary::build({"a b <unk> a", "  \t "});
  EXPECT_TRUE(v.has_eos());
  EXPECT_EQ(v.eos_id(), 1u);
  EXPECT_EQ(v.count(0), 1);  // the text's own <unk>
  EXPECT_EQ(v.encode_line(" a  b\t<unk> zebra "), (std::vector<uint32_t>{2, 3, 0, 0, 1}));
  EXPECT_TRUE(v.encode_line("   ").empty());  // no <eos> after an empty line
  EXPECT_EQ(v.id("never-seen"), 0u);
  EXPECT_EQ(v.decode(v.encode_line("a b")), "a b <eos>");

  VocabOptions no_eos;
  no_eos.eos = false;
  auto n = Vocabulary::build({"a b a"}, no_eos);
  EXPECT_FALSE(n.has_eos());
  EXPECT_EQ(n.size(), 3);
  EXPECT_EQ(n.word(1), "a");
  EXPECT_EQ(n.encode_line("a b"), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(n.id("<eos>"), 0u);
}

TEST(Vocab, MinFreqAndMaxSize) {
  VocabOptions o;
  o.min_freq = 2;
  auto v = Vocabulary::build({"a a a b b c d <unk>"}, o);
  EXPECT_EQ(v.size(), 4);  // <unk> <eos> a b
  EXPECT_EQ(v.id("c"), 0u);
  EXPECT_EQ(v.count(0), 3);  // c, d and the text's <unk>

  VocabOptions m;
  m.max_size = 3;
  auto w = Vocabulary::build({"a a a b b c"}, m);
  EXPECT_EQ(w.size(), 3);
  EXPECT_EQ(w.word(2), "a");
  EXPECT_EQ(w.id("b"), 0u);
  EXPECT_EQ(w.count(0), 3);

  VocabOptions bad;
  bad.min_freq = 0;
  expect_error([&] { VocabBuilder b(bad); }, "min_freq");
  VocabOptions tiny;
  tiny.max_size = 1;
  expect_error([&] { VocabBuilder b(tiny); }, "max_size");
  expect_error([&] { v.word(99); }, "outside the vocabulary");
}

TEST(Vocab, SaveLoadRoundTrip) {
  TempDir d;
  for (bool lower : {false, true}) {
    for (bool eos : {false, true}) {
      VocabOptions o;
      o.lowercase = lower;
      o.eos = eos;
      auto v = Vocabulary::build({"Hello world hello", "ÉCOLE x y z x"}, o);
      v.save(d / "vocab.txt");
      std::string text = read_text(d / "vocab.txt");
      EXPECT_EQ(text.substr(0, text.find('\n')),
                "dtrain-vocab 1 lower=" + std::string(lower ? "1" : "0") + " eos=" + (eos ? "1" : "0"));
      auto l = Vocabulary::load(d / "vocab.txt");
      ASSERT_EQ(l.size(), v.size());
      EXPECT_EQ(l.lowercase(), lower);
      EXPECT_EQ(l.has_eos(), eos);
      for (uint32_t i = 0; i < uint32_t(v.size()); ++i) {
        EXPECT_EQ(l.word(i), v.word(i));
        EXPECT_EQ(l.count(i), v.count(i));
      }
      EXPECT_EQ(l.encode_line("HELLO École q"), v.encode_line("HELLO École q"));
    }
  }
}

TEST(Vocab, LoadRejectsMalformedFiles) {
  TempDir d;
  auto bad = [&](const std::string& text, const std::string& needle) {
    write_text(d / "v.txt", text);
    expect_error([&] { Vocabulary::load(d / "v.txt"); }, needle);
  };
  bad("", "is empty");
  bad("dtrain-vocab 2 lower=1 eos=1\n<unk>\t0\n", "no valid header");
  bad("hello\t3\n", "no valid header");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\n<eos>\t1\nword\n", "line 4 is malformed");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\n<eos>\t1\nword\tx\n", "bad count");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\n<eos>\t1\nword\t-2\n", "bad count");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\n<eos>\t1\na\t2\na\t1\n", "repeats");
  bad("dtrain-vocab 1 lower=1 eos=0\na\t1\n", "<unk> first");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\na\t1\n", "<eos> second");
  bad("dtrain-vocab 1 lower=1 eos=1\n<unk>\t0\n", "lists no words");
  bad("dtrain-vocab 1 lower=1 eos=0\n<unk>\t0\nx y\t1\n", "whitespace");
  expect_error([&] { Vocabulary::load(d / "missing.txt"); }, "cannot read");
}

TEST(TokenFile, RoundTrip) {
  TempDir d;
  std::vector<uint32_t> ids{5, 0, 9, 3, 3, 1};
  write_token_file(d / "t.bin", 10, ids, 0xC0FFEE42u);
  EXPECT_EQ(fs::file_size(d / "t.bin"), 32u + 4 * ids.size());
  EXPECT_EQ(read_text(d / "t.bin").substr(0, 8), "DTRTOK01");
  TokenFile f(d / "t.bin");
  EXPECT_EQ(f.size(), 6);
  EXPECT_EQ(f.vocab_size(), 10u);
  EXPECT_TRUE(f.has_vocab_crc32c());
  EXPECT_EQ(f.vocab_crc32c(), 0xC0FFEE42u);
  EXPECT_EQ(tokens_of(f), ids);
  EXPECT_EQ(f[2], 9u);
  f.check_ids();
  TokenFile moved(std::move(f));
  EXPECT_EQ(moved.size(), 6);
  EXPECT_EQ(tokens_of(moved), ids);

  write_token_file(d / "empty.bin", 3, std::vector<uint32_t>{}, 0);
  TokenFile e(d / "empty.bin");
  EXPECT_EQ(e.size(), 0);
  // No temporary files are left behind.
  int n = 0;
  for (auto& p : fs::directory_iterator(d.path)) n += p.path().string().find(".tmp") != std::string::npos;
  EXPECT_EQ(n, 0);
}

TEST(TokenFile, CorruptFilesRaiseError) {
  TempDir d;
  std::vector<uint32_t> ids(100, 7);
  write_token_file(d / "t.bin", 8, ids, 0);
  std::string good = read_text(d / "t.bin");

  fs::resize_file(d / "t.bin", good.size() - 4);
  expect_error([&] { TokenFile f(d / "t.bin"); }, "is truncated: header says 100 tokens");
  expect_error([&] { TokenFile f(d / "t.bin"); }, "run `dtrain data prepare` again");

  write_text(d / "t.bin", good + "xxxx");
  expect_error([&] { TokenFile f(d / "t.bin"); }, "more than the 100 tokens");

  write_text(d / "t.bin", good.substr(0, 20));
  expect_error([&] { TokenFile f(d / "t.bin"); }, "truncated");

  std::string magic = good;
  magic[0] = 'X';
  write_text(d / "t.bin", magic);
  expect_error([&] { TokenFile f(d / "t.bin"); }, "not a dtrain token file");

  std::string version = good;
  version[8] = 3;
  write_text(d / "t.bin", version);
  expect_error([&] { TokenFile f(d / "t.bin"); }, "version 3");
  // Version 1 (before the vocabulary checksum) is read, with no checksum to check.
  version[8] = 1;
  write_text(d / "t.bin", version);
  EXPECT_FALSE(TokenFile(d / "t.bin").has_vocab_crc32c());

  expect_error([&] { TokenFile f(d / "nope.bin"); }, "cannot open token file");

  std::string bad_id = good;
  bad_id[32 + 4 * 57] = 8;  // id 8 with vocab_size 8
  write_text(d / "t.bin", bad_id);
  TokenFile f(d / "t.bin");  // ids are not checked eagerly
  expect_error([&] { f.check_ids(); }, "id 8 at position 57");
}

namespace {
const char* kWikiTrain =
    " \n = Valkyria Chronicles = \n \n The game began development in 2010 . \n It is the <unk> game . \n";
const char* kWikiValid = " \n = Other = \n \n The game is new . \n";
const char* kWikiTest = " \n The Zebra began . \n";
}  // namespace

TEST(Prepare, WikiTextFolder) {
  for (const char* pattern : {"wiki.%.tokens", "%.txt"}) {
    TempDir d;
    fs::create_directories(d.path / "in");
    auto name = [&](const std::string& split) {
      std::string p = pattern;
      return (d.path / "in" / p.replace(p.find('%'), 1, split)).string();
    };
    write_text(name("train"), kWikiTrain);
    write_text(name("valid"), kWikiValid);
    write_text(name("test"), kWikiTest);
    PrepareOptions o;
    o.input = (d.path / "in").string();
    o.out_dir = d / "out";
    PrepareReport r = prepare_dataset(o);
    EXPECT_EQ(r.format, "wikitext");
    // train: "= valkyria chronicles =" (4+eos) + 7+eos + 6+eos = 20 tokens.
    EXPECT_EQ(r.train_tokens, 20);
    EXPECT_EQ(r.valid_tokens, 3 + 1 + 5 + 1);
    EXPECT_EQ(r.test_tokens, 4 + 1);
    EXPECT_EQ(r.train_unk, 1);

    Vocabulary v = Vocabulary::load(d / "out/vocab.txt");
    EXPECT_EQ(v.size(), r.vocab_size);
    EXPECT_EQ(v.word(2), ".");  // ".", "=", "game", "the" twice each: byte order
    EXPECT_EQ(v.word(3), "=");
    EXPECT_EQ(v.word(5), "the");
    TokenFile train(d / "out/train.bin"), valid(d / "out/valid.bin"), test(d / "out/test.bin");
    EXPECT_EQ(train.size(), r.train_tokens);
    EXPECT_EQ(train.vocab_size(), uint32_t(v.size()));
    train.check_ids();
    EXPECT_EQ(v.decode(std::vector<uint32_t>(train.data(), train.data() + 5)), "= valkyria chronicles = <eos>");
    EXPECT_EQ(v.decode(tokens_of(test)), "the <unk> began . <eos>");  // "zebra" is not in train

    auto meta = read_meta(d / "out/meta.txt");
    EXPECT_EQ(meta.at("vocab_size"), std::to_string(v.size()));
    EXPECT_EQ(meta.at("train_tokens"), "20");
    EXPECT_EQ(meta.at("valid_tokens"), "10");
    EXPECT_EQ(meta.at("test_tokens"), "5");
    EXPECT_EQ(meta.at("lowercase"), "1");
    EXPECT_EQ(meta.at("eos"), "1");
    EXPECT_EQ(meta.at("source"), o.input);
  }
}

TEST(Prepare, PlainTextSplitsByParagraph) {
  TempDir d;
  std::string text;
  for (int p = 0; p < 100; ++p) {
    for (int l = 0; l < 3; ++l) text += "Para" + std::to_string(p) + " line words\n";
    text += "\n";
  }
  write_text(d / "corpus.txt", text);
  PrepareOptions o;
  o.input = d / "corpus.txt";
  o.out_dir = d / "out";
  PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.format, "plain");
  EXPECT_EQ(r.train_tokens, 80 * 3 * 4);
  EXPECT_EQ(r.valid_tokens, 10 * 3 * 4);
  EXPECT_EQ(r.test_tokens, 10 * 3 * 4);
  // valid and test words were never in train: all <unk> except shared words.
  Vocabulary v = Vocabulary::load(d / "out/vocab.txt");
  EXPECT_NE(v.id("para79"), 0u);
  EXPECT_EQ(v.id("para80"), 0u);
  TokenFile train(d / "out/train.bin");
  EXPECT_EQ(v.word(train[train.size() - 4]), "para79");

  // Cut points snap back to paragraph starts: 10 paragraphs of 6 lines + a blank, 3 trailing
  // blanks (73 lines): test target line 65 -> 63, valid target 55 -> 49.
  TempDir e;
  std::string t2;
  for (int p = 0; p < 10; ++p) {
    for (int l = 0; l < 6; ++l) t2 += "w" + std::to_string(p) + "\n";
    t2 += "\n";
  }
  t2 += "\n\n\n";
  write_text(e / "c.txt", t2);
  PrepareOptions o2;
  o2.input = e / "c.txt";
  o2.out_dir = e / "out";
  o2.eos = false;
  PrepareReport r2 = prepare_dataset(o2);
  EXPECT_EQ(r2.train_tokens, 7 * 6);
  EXPECT_EQ(r2.valid_tokens, 2 * 6);
  EXPECT_EQ(r2.test_tokens, 6);
}

TEST(Prepare, PlainFolderFilesSortedByName) {
  TempDir d;
  fs::create_directories(d.path / "in");
  std::string b, a;
  for (int i = 0; i < 20; ++i) b += "bravo\n\n";
  for (int i = 0; i < 20; ++i) a += "alpha\n\n";
  write_text(d / "in/b.txt", b);
  write_text(d / "in/a.txt", a);
  write_text(d / "in/.hidden", "hidden words\n");
  fs::create_symlink(d / "in/a.txt", d / "in/c-link.txt");  // same file once
  PrepareOptions o;
  o.input = d / "in";
  o.out_dir = d / "out";
  o.eos = false;
  PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.train_tokens + r.valid_tokens + r.test_tokens, 40);
  EXPECT_EQ(r.train_tokens, 32);
  Vocabulary v = Vocabulary::load(d / "out/vocab.txt");
  TokenFile train(d / "out/train.bin"), test(d / "out/test.bin");
  EXPECT_EQ(v.word(train[0]), "alpha");
  EXPECT_EQ(v.word(test[0]), "bravo");
  EXPECT_EQ(v.id("hidden"), 0u);
}

TEST(Prepare, ErrorPaths) {
  TempDir d;
  PrepareOptions o;
  o.out_dir = d / "out";

  o.input = d / "missing";
  expect_error([&] { prepare_dataset(o); }, "not found");

  write_text(d / "blank.txt", "\n   \n\n");
  o.input = d / "blank.txt";
  expect_error([&] { prepare_dataset(o); }, "empty train split");

  fs::create_directories(d.path / "emptydir");
  o.input = d / "emptydir";
  expect_error([&] { prepare_dataset(o); }, "has no text files");

  fs::create_directories(d.path / "half");
  write_text(d / "half/wiki.train.tokens", "a b c\n");
  o.input = d / "half";
  expect_error([&] { prepare_dataset(o); }, "but no wiki.valid.tokens");

  fs::create_directories(d.path / "dirsplit/valid.txt");  // a folder where a file should be
  write_text(d / "dirsplit/train.txt", "a b c\n");
  write_text(d / "dirsplit/test.txt", "a b c\n");
  o.input = d / "dirsplit";
  expect_error([&] { prepare_dataset(o); }, "cannot read");

  fs::create_directories(d.path / "notrain");
  write_text(d / "notrain/train.txt", "\n\n");
  write_text(d / "notrain/valid.txt", "a\n");
  write_text(d / "notrain/test.txt", "a\n");
  o.input = d / "notrain";
  expect_error([&] { prepare_dataset(o); }, "has no tokens");

  write_text(d / "ok.txt", "a b c\n\nd e f\n");
  o.input = d / "ok.txt";
  o.valid_fraction = 0.6;
  o.test_fraction = 0.5;
  expect_error([&] { prepare_dataset(o); }, "--valid-fraction");
  o.valid_fraction = o.test_fraction = 0.1;

  o.min_freq = 0;
  expect_error([&] { prepare_dataset(o); }, "min_freq");
  o.min_freq = 1;

  o.input = d / "half";
  o.out_dir = d / "half";
  expect_error([&] { prepare_dataset(o); }, "is the input folder");

  write_text(d / "meta.txt", "a=1\nbroken line\n");
  expect_error([&] { read_meta(d / "meta.txt"); }, "line 2 is malformed");
}

TEST(Prepare, RejectsBinaryInput) {
  TempDir d;
  PrepareOptions o;
  o.out_dir = d / "out";
  std::string elf = "\x7f" "ELF\x02\x01\x01";
  elf += std::string(9, '\0') + "some words after the header\n";
  write_text(d / "prog", elf);
  o.input = d / "prog";
  expect_error([&] { prepare_dataset(o); }, "input " + (d / "prog") + " is a binary file, not text (a NUL byte at offset 7)");
  expect_error([&] { prepare_dataset(o); }, "pass UTF-8 text files with --input");
  EXPECT_FALSE(fs::exists(d.path / "out/vocab.txt"));

  // No NUL, but a fifth of the bytes are control bytes.
  std::string ctrl;
  for (int i = 0; i < 200; ++i) ctrl += "ab\x01\x02" "cdef\x1b\x7f";
  write_text(d / "ctrl.dat", ctrl);
  o.input = d / "ctrl.dat";
  expect_error([&] { prepare_dataset(o); }, "control bytes in its first");

  // In a folder, the binary file is named; text with tabs, form feeds and a few escapes is fine.
  fs::create_directories(d.path / "in");
  std::string text;
  for (int p = 0; p < 30; ++p) text += "para\tnumber " + std::to_string(p) + "\f \x1b[1mbold\x1b[0m\n\n";
  write_text(d / "in/a.txt", text);
  o.input = d / "in";
  EXPECT_GT(prepare_dataset(o).train_tokens, 0);
  write_text(d / "in/b.gz", std::string("\x1f\x8b\x08\x00", 4) + "xyz");
  expect_error([&] { prepare_dataset(o); }, (d / "in/b.gz") + " is a binary file");

  // The ready-made splits are checked too.
  fs::create_directories(d.path / "wiki");
  write_text(d / "wiki/train.txt", "a b c\n");
  write_text(d / "wiki/valid.txt", std::string("a\0b\n", 4));
  write_text(d / "wiki/test.txt", "a b\n");
  o.input = d / "wiki";
  expect_error([&] { prepare_dataset(o); }, (d / "wiki/valid.txt") + " is a binary file");
}

TEST(Prepare, InvalidUtf8IsReplacedAndCounted) {
  TempDir d;
  // Latin-1 "café" (1), an overlong '/' (2: C0 and AF are each invalid), a surrogate (3: ED, A0,
  // 80), a 3-byte sequence cut short by a space (1: E2 82), and valid 2-, 3- and 4-byte characters.
  const std::string line = "caf\xe9 x\xc0\xafy s\xed\xa0\x80z e\xe2\x82 ok \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n";
  std::string text;
  for (int i = 0; i < 10; ++i) text += line;
  write_text(d / "c.txt", text);
  PrepareOptions o;
  o.input = d / "c.txt";
  o.out_dir = d / "out";
  o.valid_fraction = o.test_fraction = 0;
  PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.invalid_utf8, 10 * 7);
  EXPECT_EQ(r.invalid_utf8_file, o.input);
  EXPECT_EQ(r.invalid_utf8_offset, 3);
  EXPECT_EQ(read_meta(d / "out/meta.txt").at("invalid_utf8"), "70");
  Vocabulary v = Vocabulary::load(d / "out/vocab.txt");
  const std::string fffd = "\xef\xbf\xbd";
  for (const std::string& w : {"caf" + fffd, "x" + fffd + fffd + "y", "s" + fffd + fffd + fffd + "z", "e" + fffd,
                               std::string("ok"), std::string("\xc3\xa9t\xc3\xa9"), std::string("\xe2\x82\xac"),
                               std::string("\xf0\x9f\x98\x80")}) {
    EXPECT_NE(v.id(w), 0u) << w;
    EXPECT_EQ(v.count(v.id(w)), 10) << w;
  }
  EXPECT_EQ(v.size(), 2 + 8);
  EXPECT_EQ(r.train_tokens, 10 * 9);

  // A valid character across the 64 KiB read boundary is not invalid; one cut by the end of the
  // file is (at its offset).
  std::string big(65534, 'a');  // the euro sign's 3 bytes sit at offsets 65535..65537
  big += " \xe2\x82\xac end\n\xe2\x82";
  write_text(d / "b.txt", big);
  o.input = d / "b.txt";
  r = prepare_dataset(o);
  EXPECT_EQ(r.invalid_utf8, 1);
  EXPECT_EQ(r.invalid_utf8_offset, int64_t(big.size()) - 2);
  EXPECT_NE(Vocabulary::load(d / "out/vocab.txt").id("\xe2\x82\xac"), 0u);
}

TEST(Prepare, LongSingleLine) {
  TempDir d;
  // ~4 MB on one line, no newline at the end: words w0 .. w9999 over and over.
  const int64_t n_words = 600000;
  std::string text;
  for (int64_t i = 0; i < n_words; ++i) text += (i ? " w" : "w") + std::to_string(i % 10000);
  ASSERT_GT(text.size(), size_t(3) << 20);
  write_text(d / "one.txt", text);
  PrepareOptions o;
  o.input = d / "one.txt";
  o.out_dir = d / "out";
  PrepareReport r = prepare_dataset(o);
  // Words stay whole (no piece boundary cuts one), and the line's single <eos> ends it.
  EXPECT_EQ(r.train_tokens + r.valid_tokens + r.test_tokens, n_words + 1);
  EXPECT_NEAR(double(r.train_tokens) / double(n_words), 0.8, 0.02);
  EXPECT_NEAR(double(r.valid_tokens) / double(n_words), 0.1, 0.02);
  Vocabulary v = Vocabulary::load(d / "out/vocab.txt");
  EXPECT_EQ(v.size(), 2 + 10000);
  EXPECT_EQ(r.train_unk, 0);
  TokenFile train(d / "out/train.bin"), valid(d / "out/valid.bin"), test(d / "out/test.bin");
  std::vector<uint32_t> all = tokens_of(train), part = tokens_of(valid);
  all.insert(all.end(), part.begin(), part.end());
  part = tokens_of(test);
  all.insert(all.end(), part.begin(), part.end());
  ASSERT_EQ(int64_t(all.size()), n_words + 1);
  for (int64_t i = 0; i < n_words; i += 997) ASSERT_EQ(v.word(all[size_t(i)]), "w" + std::to_string(i % 10000)) << i;
  EXPECT_EQ(all.back(), v.eos_id());
  EXPECT_EQ(std::count(all.begin(), all.end(), v.eos_id()), 1);

  // A long line among short ones: no token lost, one <eos> per line; a 40000-byte "word" is cut
  // into 16 KiB pieces (3 words).
  const std::string long_line = text.substr(0, 100000);
  const int64_t long_words = 1 + std::count(long_line.begin(), long_line.end(), ' ');
  write_text(d / "mixed.txt", "first line\n\n" + long_line + "\nlast line\n" + std::string(40000, 'x') + "\n");
  o.input = d / "mixed.txt";
  o.valid_fraction = o.test_fraction = 0;
  r = prepare_dataset(o);
  EXPECT_EQ(r.train_tokens, 3 + (long_words + 1) + 3 + (3 + 1));
}

TEST(Vocab, CheckVocabMatchesTokenFiles) {
  TempDir d;
  auto v = Vocabulary::build({"a b c"});  // <unk> <eos> a b c
  v.save(d / "vocab.txt");
  const std::string saved = read_text(d / "vocab.txt");
  const uint32_t crc = crc32c(saved.data(), saved.size());
  write_token_file(d / "train.bin", 5, std::vector<uint32_t>{2, 3, 4, 1}, crc);
  const TokenFile train(d / "train.bin");
  EXPECT_TRUE(check_vocab_matches(d / "vocab.txt", {&train}));
  write_token_file(d / "big.bin", 3143, std::vector<uint32_t>{2, 3}, crc);
  const TokenFile big(d / "big.bin");
  // every file given is checked, not only the first
  expect_error([&] { check_vocab_matches(d / "vocab.txt", {&train, &big}); },
               "vocabulary file " + (d / "vocab.txt") + " lists 5 words but " + (d / "big.bin") +
                   " was written for a vocabulary of 3143: run `dtrain data prepare`");
  expect_error([&] { check_vocab_matches(d / "none.txt", {&train}); },
               "vocabulary file " + (d / "none.txt") + " is missing");
  // Two words swapped (same count of words, a valid vocabulary): the checksum tells.
  std::string swapped = saved;
  const size_t a = swapped.find("\na\t"), b = swapped.find("\nb\t");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  std::swap(swapped[a + 1], swapped[b + 1]);
  write_text(d / "vocab.txt", swapped);
  EXPECT_EQ(Vocabulary::load(d / "vocab.txt").size(), 5);
  expect_error([&] { check_vocab_matches(d / "vocab.txt", {&train}); },
               "vocabulary file " + (d / "vocab.txt") + " is not the one " + (d / "train.bin") + " was prepared with");
  // A token file of an older dtrain has no checksum: sizes are checked, the rest cannot be.
  write_token_file(d / "old.bin", 5, std::vector<uint32_t>{2, 3}, 0);
  std::string old = read_text(d / "old.bin");
  old[8] = 1;
  write_text(d / "old.bin", old);
  const TokenFile v1(d / "old.bin");
  EXPECT_FALSE(check_vocab_matches(d / "vocab.txt", {&v1}));
}

TEST(BuiltinCorpus, SplitRuleAndSymlinks) {
  TempDir d;
  fs::create_directories(d.path / "src");
  std::string a;
  for (int p = 0; p < 12; ++p) a += "para" + std::to_string(p) + " first\nsecond line\n\n\n";
  write_text(d / "src/A", a);
  fs::create_symlink("A", d / "src/B");  // like GPL -> GPL-3: skipped
  make_builtin_corpus(d / "out", (d.path / "src").string());
  std::string train = read_text(d / "out/train.txt"), valid = read_text(d / "out/valid.txt"),
              test = read_text(d / "out/test.txt");
  EXPECT_EQ(valid, "para8 first\nsecond line\n\n");
  EXPECT_EQ(test, "para9 first\nsecond line\n\n");
  EXPECT_NE(train.find("para10 first"), std::string::npos);
  EXPECT_EQ(train.find("para8 "), std::string::npos);
  size_t paras = 0;
  for (size_t pos = 0; (pos = train.find("second line", pos)) != std::string::npos; ++pos) ++paras;
  EXPECT_EQ(paras, 10u);  // 0-7, 10, 11; the symlink adds nothing
}

TEST(BuiltinCorpus, Errors) {
  TempDir d;
  expect_error([&] { make_builtin_corpus(d / "out", d / "nowhere"); },
               "pass your own text with `dtrain data prepare --input DIR`");
  fs::create_directories(d.path / "empty");
  expect_error([&] { make_builtin_corpus(d / "out", d / "empty"); }, "is empty");
  fs::create_directories(d.path / "few");
  write_text(d / "few/x", "one\n\ntwo\n");
  expect_error([&] { make_builtin_corpus(d / "out", d / "few"); }, "too little text");
}

TEST(BuiltinCorpus, DebianLicences) {
  if (!fs::is_directory("/usr/share/common-licenses")) GTEST_SKIP() << "/usr/share/common-licenses is absent";
  TempDir d;
  make_builtin_corpus(d / "corpus");
  for (const char* s : {"train.txt", "valid.txt", "test.txt"})
    EXPECT_GT(fs::file_size(d.path / "corpus" / s), 1000u) << s;
  PrepareOptions o;
  o.input = d / "corpus";
  o.out_dir = d / "prepared";
  PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.format, "wikitext");
  EXPECT_GT(r.vocab_size, 1000);
  EXPECT_GT(r.train_tokens, 20000);
  EXPECT_GT(r.valid_tokens, 1000);
  EXPECT_GT(r.test_tokens, 1000);
}

// ------------------------------------------------------------------------------------- dataset
