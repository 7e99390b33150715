// Token shards: written and read back across shard boundaries (uint16, uint32), documents, damaged splits
// refused, piece cuts, the split hash, and whole preparations at several worker counts.
#include <fcntl.h>
#include <unistd.h>

#include <numeric>

#include "core/crc32c.hpp"
#include "data/corpus_reader.hpp"
#include "data/prepare_shards.hpp"
#include "data/shard_dataset.hpp"
#include "data/shard_format.hpp"
#include "data/shard_writer.hpp"
#include "data/token_shards.hpp"
#include "data_test_util.hpp"

namespace {

const std::string kTokenizerBytes = "not a real tokenizer, only its bytes\n";

// A split written by SplitWriter into `dir`/train: documents of the given lengths, ids counting up
// (modulo the vocabulary), with vocab.txt (kTokenizerBytes) beside it.
std::vector<uint32_t> write_split(const TempDir& dir, uint32_t vocab, int64_t shard_tokens,
                                  const std::vector<int64_t>& doc_lengths) {
  write_text(dir / "vocab.txt", kTokenizerBytes);
  SplitWriterSettings s;
  s.split = "train";
  s.dir = dir / "train";
  s.id_bytes = shard_id_bytes(vocab);
  s.vocab_size = vocab;
  s.tokenizer_crc32c = crc32c(kTokenizerBytes.data(), kTokenizerBytes.size());
  s.shard_tokens = shard_tokens;
  SplitWriter w(s);
  std::vector<uint32_t> all;
  uint64_t next = 0;
  for (int64_t len : doc_lengths) {
    std::vector<uint32_t> doc;
    for (int64_t i = 0; i < len; ++i) doc.push_back(uint32_t((next++ * 7919) % vocab));
    // in two appends, as the writer gets a document's pieces
    w.append(std::span(doc).first(doc.size() / 2));
    w.append(std::span(doc).subspan(doc.size() / 2));
    if (len == 0) {
      w.skip_document();
    } else {
      w.end_document();
    }
    all.insert(all.end(), doc.begin(), doc.end());
  }
  Json context;
  context["tokenizer"] = {{"file", "vocab.txt"},
                          {"kind", "word"},
                          {"crc32c", s.tokenizer_crc32c},
                          {"vocab_size", vocab},
                          {"eos_id", 1},
                          {"bos_id", -1}};
  context["inputs"] = Json::array({"test"});
  context["options"] = Json::object();
  w.finish(context);
  return all;
}

std::vector<int32_t> copy_of(const TokenShards& t, int64_t start, int64_t count) {
  std::vector<int32_t> out(size_t(count), -1);
  t.copy(start, count, out.data());
  return out;
}

std::vector<int32_t> widened(const std::vector<uint32_t>& ids, int64_t start, int64_t count) {
  return std::vector<int32_t>(ids.begin() + start, ids.begin() + start + count);
}

void overwrite(const std::string& path, int64_t offset, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), offset), ssize_t(bytes.size()));
  ::close(fd);
}

}  // namespace

TEST(DataShards, Uint16CrossesShardBoundaries) {
  TempDir dir;
  const std::vector<uint32_t> all = write_split(dir, 1000, 7, {5, 9, 1, 0, 20});
  const TokenShards t(dir / "train");
  EXPECT_EQ(t.id_bytes(), 2);
  EXPECT_EQ(t.tokens(), 35);
  EXPECT_EQ(t.shard_count(), 5);  // 7 + 7 + 7 + 7 + 7
  EXPECT_EQ(t.documents(), 4);    // the empty one is skipped
  EXPECT_EQ(t.vocab_size(), 1000);
  EXPECT_EQ(t.tokenizer_crc32c(), crc32c(kTokenizerBytes.data(), kTokenizerBytes.size()));
  EXPECT_EQ(t.document_range(0), std::make_pair(int64_t(0), int64_t(5)));
  EXPECT_EQ(t.document_range(1), std::make_pair(int64_t(5), int64_t(14)));
  EXPECT_EQ(t.document_range(2), std::make_pair(int64_t(14), int64_t(15)));
  EXPECT_EQ(t.document_range(3), std::make_pair(int64_t(15), int64_t(35)));
  EXPECT_EQ(copy_of(t, 0, 35), widened(all, 0, 35));
  for (int64_t start = 0; start < 35; start += 3)
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(6), int64_t(15)})
      if (start + n <= 35) {
        EXPECT_EQ(copy_of(t, start, n), widened(all, start, n)) << start << " " << n;
      }
  expect_error([&] { copy_of(t, 30, 6); }, "outside the 35 tokens");
  expect_error([&] { t.document_range(4); }, "outside the 4 documents");
  EXPECT_NO_THROW(t.verify());
  // the last shard is not full: its header says so
  EXPECT_EQ(t.manifest()["shards"][4]["tokens"], 7);
}

TEST(DataShards, Uint32KeepsLargeIds) {
  TempDir dir;
  const std::vector<uint32_t> all = write_split(dir, 100000, 1000, {3000, 17});
  ASSERT_TRUE(std::any_of(all.begin(), all.end(), [](uint32_t v) { return v > 65535; }));
  const TokenShards t(dir / "train");
  EXPECT_EQ(t.id_bytes(), 4);
  EXPECT_EQ(t.shard_count(), 4);
  EXPECT_EQ(copy_of(t, 0, t.tokens()), widened(all, 0, t.tokens()));
  EXPECT_EQ(copy_of(t, 999, 2), widened(all, 999, 2));
  EXPECT_EQ(t.document_range(1), std::make_pair(int64_t(3000), int64_t(3017)));
  EXPECT_EQ(fs::file_size(dir / "train/shard-00000.bin"), uint64_t(kShardHeaderBytes + 4 * 1000));
}

// A window's inputs and targets, as the loader reads them.
std::pair<std::vector<int32_t>, std::vector<int32_t>> window(const Dataset& d, int64_t i, int64_t T) {
  std::vector<int32_t> in(static_cast<size_t>(T)), target(static_cast<size_t>(T));
  d.get(i, in.data(), target.data());
  return {in, target};
}

TEST(DataShards, WindowsRunAcrossDocumentsAndShards) {
  TempDir dir;
  const std::vector<uint32_t> all = write_split(dir, 1000, 7, {5, 9, 1, 20});
  const TokenShards t(dir / "train");
  const ShardWindowDataset d(t, 4, {3, false});
  EXPECT_EQ(d.size(), (35 - 4 - 1) / 3 + 1);
  for (int64_t i = 0; i < d.size(); ++i) {
    const auto [in, target] = window(d, i, 4);
    EXPECT_EQ(in, widened(all, 3 * i, 4)) << i;
    EXPECT_EQ(target, widened(all, 3 * i + 1, 4)) << i;
  }
  const ShardWindowDataset eval(t, 4, {});  // stride 0: a window's length
  EXPECT_EQ(eval.size(), (35 - 5) / 4 + 1);
  expect_error([&] { ShardWindowDataset(t, 35, {}); }, "holds 35 tokens, fewer than seq_len+1 = 36");
}

TEST(DataShards, WindowsStayInsideDocumentsWhenAsked) {
  TempDir dir;
  const std::vector<uint32_t> all = write_split(dir, 1000, 7, {5, 9, 1, 20});  // documents at 0, 5, 14, 15
  const TokenShards t(dir / "train");
  const ShardWindowDataset d(t, 4, {2, true});
  // documents of 5, 9, 1, 20 tokens hold (L - 5) / 2 + 1 windows when L >= 5: 1, 3, 0, 8
  ASSERT_EQ(d.size(), 12);
  const std::vector<int64_t> starts = {0, 5, 7, 9, 15, 17, 19, 21, 23, 25, 27, 29};
  for (int64_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(d.window_start(i), starts[size_t(i)]) << i;
    const auto [in, target] = window(d, i, 4);
    EXPECT_EQ(in, widened(all, starts[size_t(i)], 4));
    EXPECT_EQ(target, widened(all, starts[size_t(i)] + 1, 4));
  }
  expect_error([&] { ShardWindowDataset(t, 20, {1, true}); }, "has no document of seq_len+1 = 21 tokens");
}

TEST(DataShards, HeaderFieldsAreTheFormat) {
  TempDir dir;
  write_split(dir, 500, 4, {6});
  const std::string bytes = read_text(dir / "train/shard-00001.bin");
  ASSERT_EQ(bytes.size(), size_t(64 + 2 * 2));
  ShardHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  EXPECT_EQ(std::string(h.magic, 8), "DTRSHARD");
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.id_bytes, 2u);
  EXPECT_EQ(h.vocab_size, 500u);
  EXPECT_EQ(h.n_tokens, 2u);
  EXPECT_EQ(h.first_token, 4u);
  const std::string idx = read_text(dir / "train/documents.idx");
  ASSERT_EQ(idx.size(), size_t(16 + 8 * 2));
  EXPECT_EQ(idx.substr(0, 8), "DTRDOCS1");
}

TEST(DataShards, TruncatedOrAlteredShardIsRefused) {
  TempDir dir;
  write_split(dir, 1000, 10, {25});
  const std::string shard = dir / "train/shard-00001.bin";
  fs::resize_file(shard, fs::file_size(shard) - 2);
  expect_error([&] { TokenShards t(dir / "train"); }, "token shard " + shard + " is truncated");

  TempDir dir2;
  write_split(dir2, 1000, 10, {25});
  const std::string shard2 = dir2 / "train/shard-00002.bin";
  overwrite(shard2, 64, "\x05");  // an id changed: only the checksum tells
  const TokenShards t(dir2 / "train");
  expect_error([&] { t.verify(); }, "token shard " + shard2 + " was altered after prepare");

  TempDir dir3;
  write_split(dir3, 1000, 10, {25});
  const std::string shard3 = dir3 / "train/shard-00001.bin";
  overwrite(shard3, 32, std::string("\x00\x00\x00\x00\x00\x00\x00\x00", 8));  // n_tokens says 0
  expect_error([&] { TokenShards t(dir3 / "train"); }, "token shard " + shard3 + " holds tokens");

  TempDir dir4;
  write_split(dir4, 1000, 10, {25});
  write_text(dir4 / "vocab.txt", "another tokenizer\n");
  const TokenShards t4(dir4 / "train");
  expect_error([&] { t4.verify(); }, "is not the tokenizer");
  expect_error([&] { TokenShards t(dir4 / "nothing"); }, "is not a prepared split");
}

TEST(DataShards, PieceCutsAfterNewlineElseBeforeSpaceElseOnCharacter) {
  std::string text(kPieceBytes + 10, 'a');
  text[1000] = '\n';
  text[5000] = ' ';
  EXPECT_EQ(piece_cut(text), 1001u);
  text[1000] = 'a';
  EXPECT_EQ(piece_cut(text), 5000u);
  text[5000] = 'a';
  EXPECT_EQ(piece_cut(text), kPieceBytes);
  text.replace(kPieceBytes - 1, 2, "\xC3\xA9");  // é across the limit: cut before it
  EXPECT_EQ(piece_cut(text), kPieceBytes - 1);
}

TEST(DataShards, SplitHashFollowsTheFractions) {
  int count[3] = {0, 0, 0};
  for (uint64_t d = 0; d < 100000; ++d) ++count[split_of_document(d, 7, 0.1, 0.05)];
  EXPECT_NEAR(count[1], 10000, 600);
  EXPECT_NEAR(count[2], 5000, 450);
  EXPECT_EQ(split_of_document(123, 7, 0.1, 0.05), split_of_document(123, 7, 0.1, 0.05));
  int differ = 0;
  for (uint64_t d = 0; d < 1000; ++d) differ += split_of_document(d, 1, 0.5, 0) != split_of_document(d, 2, 0.5, 0);
  EXPECT_GT(differ, 300);  // another seed, another split
}

namespace {

// A word-level tokenizer over a few words, and a corpus folder of documents that use them.
std::string make_corpus(const TempDir& dir) {
  Vocabulary v = Vocabulary::build({"alpha beta gamma delta epsilon zeta eta theta"});
  v.save(dir / "vocab.txt");
  fs::create_directories(dir / "corpus/sub");
  write_text(dir / "corpus/a.txt", "alpha beta\ngamma\n");
  write_text(dir / "corpus/sub/b.txt", "   \n");  // encodes to nothing: skipped
  std::string big;
  for (int i = 0; i < 300000; ++i) big += i % 13 ? "delta epsilon " : "zeta\n";  // longer than a piece
  write_text(dir / "corpus/c.txt", big);
  write_text(dir / "corpus/.hidden.txt", "theta theta theta");
  return dir / "corpus";
}

ShardPrepareOptions corpus_options(const TempDir& dir, const std::string& out, int workers) {
  ShardPrepareOptions o;
  o.tokenizer = dir / "vocab.txt";
  o.inputs = {dir / "corpus"};
  o.out_dir = dir / out;
  o.split = "train";
  o.workers = workers;
  o.memory_mib = kMinPrepareMemoryMib;
  o.shard_tokens = 50000;
  return o;
}

}  // namespace

TEST(DataShards, PrepareIsTheSameAtAnyWorkerCount) {
  TempDir dir;
  make_corpus(dir);
  const ShardPrepareReport r1 = prepare_shards(corpus_options(dir, "w1", 1));
  const ShardPrepareReport r3 = prepare_shards(corpus_options(dir, "w3", 3));
  ASSERT_EQ(r1.splits.size(), 1u);
  EXPECT_EQ(r1.splits[0].documents, 2);  // a.txt and c.txt; b.txt skipped, .hidden.txt not read
  EXPECT_EQ(r1.splits[0].skipped, 1);
  EXPECT_EQ(r1.files, 3);
  for (const auto& e : fs::directory_iterator(dir / "w1/train"))
    EXPECT_EQ(read_text(e.path().string()), read_text(dir / ("w3/train/" + e.path().filename().string())))
        << e.path();
  EXPECT_EQ(read_text(dir / "w1/vocab.txt"), read_text(dir / "vocab.txt"));
  const TokenShards t(dir / "w1/train");
  const Vocabulary v = Vocabulary::load(dir / "vocab.txt");
  const auto [b, e] = t.document_range(0);
  std::vector<int32_t> ids = copy_of(t, b, e - b);
  std::vector<uint32_t> u(ids.begin(), ids.end());
  EXPECT_EQ(v.decode(u), "alpha beta gamma <eos>");
  EXPECT_EQ(t.tokens(), r1.splits[0].tokens);
  EXPECT_GT(t.shard_count(), 10);
  t.verify();
}

TEST(DataShards, PrepareRefusesWhatItCannotDo) {
  TempDir dir;
  make_corpus(dir);
  ShardPrepareOptions o = corpus_options(dir, "out", 1);
  o.memory_mib = 8;
  expect_error([&] { prepare_shards(o); }, "--memory-mib 8 is too small");
  o = corpus_options(dir, "out", 1);
  o.inputs = {dir / "missing.txt"};
  expect_error([&] { prepare_shards(o); }, "input " + (dir / "missing.txt") + " not found");
  o = corpus_options(dir, "out", 1);
  o.inputs = {dir / "corpus/sub"};
  expect_error([&] { prepare_shards(o); }, "the inputs hold no documents");
  EXPECT_FALSE(fs::exists(dir / "out")) << "a failed prepare leaves no folder it made";
  o = corpus_options(dir, "corpus", 1);  // the input folder holds what prepare did not make
  expect_error([&] { prepare_shards(o); }, "holds what dtrain data prepare --tokenizer did not make");
}
