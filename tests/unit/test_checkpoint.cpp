// Checkpoints: box geometry (flat ranges, pieces, region copies against naive loops), chunk files
// read back under any other cut of the same tensor (resharding), damage named by file (flipped
// byte, short file, missing index), and model checkpoints: exact round trip, another model refused
// by name, housekeeping of the checkpoints folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "ckpt/chunk_io.hpp"
#include "comm/world.hpp"
#include "core/atomic_file.hpp"
#include "model_test_util.hpp"
#include "models/transformer/kind.hpp"
#include "train/checkpoint/checkpoint.hpp"
#include "train/checkpoint/checkpoint_writer.hpp"
#include "train/config.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("dtrain_ckpt_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Row-major flat index of an element given by coordinates.
int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& at) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + at[d];
  return f;
}

// Every element of a box, in row-major order, as flat indices of the tensor.
std::vector<int64_t> elements(const std::vector<int64_t>& shape, const Box& b) {
  std::vector<int64_t> out, at(b.offsets);
  if (b.volume() == 0) return out;
  for (;;) {
    out.push_back(flat(shape, at));
    size_t d = shape.size();
    for (;;) {
      if (d == 0) return out;
      --d;
      if (++at[d] < b.offsets[d] + b.sizes[d]) break;
      at[d] = b.offsets[d];
    }
  }
}

TransformerConfig tiny(int64_t dim = 16) {
  return tiny_transformer({.vocab = 29, .seq_len = 6, .dim = dim, .heads = 2, .layers = 2, .ff_dim = 24});
}

}  // namespace

TEST(Box, FlatRangesAreContiguousBoxesInOrder) {
  std::mt19937 rng(7);
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{10}, {4, 7}, {3, 5, 6}, {1, 9}, {6, 1}, {2, 3, 4, 5}}) {
    const int64_t n = whole_box(shape).volume();
    for (int trial = 0; trial < 200; ++trial) {
      int64_t a = int64_t(rng() % uint32_t(n + 1)), b = int64_t(rng() % uint32_t(n + 1));
      if (a > b) std::swap(a, b);
      std::vector<int64_t> got;
      for (const Box& box : boxes_of_flat_range(shape, a, b)) {
        const std::vector<int64_t> e = elements(shape, box);
        ASSERT_FALSE(e.empty());
        for (size_t i = 1; i < e.size(); ++i) ASSERT_EQ(e[i], e[i - 1] + 1) << "box not contiguous";
        got.insert(got.end(), e.begin(), e.end());
      }
      std::vector<int64_t> want(size_t(b - a));
      std::iota(want.begin(), want.end(), a);
      ASSERT_EQ(got, want) << "range " << a << ".." << b;
    }
  }
}

TEST(Box, PiecesAreContiguousBoundedAndCoverTheBox) {
  const std::vector<int64_t> shape{6, 5, 4};
  const Box box{{1, 0, 0}, {4, 5, 4}};  // contiguous rows 1..4
  for (int64_t max : {1, 3, 7, 20, 21, 80, 1000}) {
    std::vector<int64_t> got;
    for (const Box& p : split_box(box, max)) {
      EXPECT_LE(p.volume(), max);
      const std::vector<int64_t> e = elements(shape, p);
      EXPECT_EQ(offset_within(box, p), int64_t(got.size()));
      got.insert(got.end(), e.begin(), e.end());
    }
    EXPECT_EQ(got, elements(shape, box)) << "max " << max;
  }
}

TEST(Box, TilingIsProvedExactlyOnce) {
  const Box whole = whole_box({6, 4});
  // Exact: rows cut unevenly, one row cut by columns, in any order.
  const std::vector<Box> exact = {{{3, 0}, {3, 4}}, {{0, 0}, {2, 4}}, {{2, 2}, {1, 2}}, {{2, 0}, {1, 2}}};
  EXPECT_EQ(tiling_problem(whole, exact), "");
  EXPECT_EQ(tiling_problem(whole, boxes_of_flat_range({6, 4}, 0, 24)), "");
  // The probe's damage: a chunk moved onto another (same total volume, half the tensor in none).
  std::vector<Box> moved = {{{0, 0}, {3, 4}}, {{0, 0}, {3, 4}}};
  EXPECT_NE(tiling_problem(whole, moved).find("chunks 0 and 1 overlap in [0:3, 0:4]"), std::string::npos)
      << tiling_problem(whole, moved);
  // Overlap found wherever the boxes sit in the list (the sweep sorts them).
  const std::vector<Box> late = {{{4, 0}, {2, 4}}, {{0, 0}, {3, 4}}, {{2, 3}, {2, 1}}, {{3, 0}, {1, 3}}};
  EXPECT_NE(tiling_problem(whole, late).find("overlap"), std::string::npos) << tiling_problem(whole, late);
  EXPECT_NE(tiling_problem(whole, {{{0, 0}, {3, 4}}}).find("12 of its 24 elements are in no chunk"), std::string::npos);
  EXPECT_NE(tiling_problem(whole, {{{0, 0}, {7, 4}}}).find("outside"), std::string::npos);
  EXPECT_NE(tiling_problem(whole, {{{0, 0}, {6, 0}}}).find("outside"), std::string::npos);  // empty chunk
  EXPECT_NE(tiling_problem(whole, {{{0}, {24}}}).find("outside"), std::string::npos);       // other rank
}

TEST(Box, CopyRegionMatchesElementwiseCopy) {
  const std::vector<int64_t> shape{7, 9};
  const Box src{{1, 2}, {5, 6}}, dst{{3, 0}, {4, 9}};
  const Box region = *intersect(src, dst);
  EXPECT_EQ(region, (Box{{3, 2}, {3, 6}}));
  std::vector<float> s(size_t(src.volume())), d(size_t(dst.volume()), -1.0f);
  const std::vector<int64_t> se = elements(shape, src);
  for (size_t i = 0; i < s.size(); ++i) s[i] = float(se[i]);  // each element holds its flat index
  copy_region(s.data(), src, d.data(), dst, region, sizeof(float));
  const std::vector<int64_t> de = elements(shape, dst), re = elements(shape, region);
  for (size_t i = 0; i < d.size(); ++i) {
    const bool inside = std::find(re.begin(), re.end(), de[i]) != re.end();
    EXPECT_EQ(d[i], inside ? float(de[i]) : -1.0f);
  }
  EXPECT_FALSE(intersect(Box{{0, 0}, {2, 2}}, Box{{2, 0}, {1, 2}}));
}

// Three "ranks" save flat thirds of a [12, 10] tensor and of a [25] one; they are read back as
// column halves (a tensor-parallel cut) and as one whole: every value lands where it belongs.
TEST(ChunkFiles, AnyCutReadsAnyOther) {
  const std::string dir = temp_dir("cuts");
  const std::vector<int64_t> mat{12, 10}, vec{25};
  std::vector<float> m(120), v(25);
  std::iota(m.begin(), m.end(), 0.0f);
  std::iota(v.begin(), v.end(), 1000.0f);
  CheckpointIndex index;
  index.meta["format"] = kCheckpointFormat;
  for (int r = 0; r < 3; ++r) {
    std::vector<ChunkSource> src;
    for (auto [name, shape, data] : {std::tuple{"m", mat, m.data()}, std::tuple{"v", vec, v.data()}}) {
      const int64_t n = whole_box(shape).volume(), a = n * r / 3, b = n * (r + 1) / 3;
      for (const Box& box : boxes_of_flat_range(shape, a, b))
        src.push_back({name, DType::f32, shape, box, data + flat(shape, box.offsets)});
    }
    write_chunk_file(dir, "rank-" + std::to_string(r) + ".bin", src, index, /*max_chunk_bytes=*/64);
  }
  index.write(dir);
  const CheckpointIndex back = CheckpointIndex::read(dir);
  EXPECT_GT(back.tensors.at("m").chunks.size(), 3u);  // cut into ≤ 64-byte chunks
  std::vector<float> left(60), right(60), whole(25);
  const ReadReport rep = read_chunks(dir, back,
                                     {{"m", DType::f32, mat, {{0, 0}, {12, 5}}, left.data()},
                                      {"m", DType::f32, mat, {{0, 5}, {12, 5}}, right.data()},
                                      {"v", DType::f32, vec, whole_box(vec), whole.data()}});
  for (int64_t i = 0; i < 12; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(left[size_t(i * 5 + j)], float(i * 10 + j));
      EXPECT_EQ(right[size_t(i * 5 + j)], float(i * 10 + 5 + j));
    }
  EXPECT_EQ(whole, v);
  EXPECT_EQ(rep.bytes_read, (120 + 25) * 4);  // each saved chunk read once for both halves
  // Only what is needed is read: one row of m reads the chunks holding that row.
  std::vector<float> row(10);
  const ReadReport one = read_chunks(dir, back, {{"m", DType::f32, mat, {{5, 0}, {1, 10}}, row.data()}});
  EXPECT_LE(one.bytes_read, 2 * 64);
  EXPECT_EQ(row[3], 53.0f);
  EXPECT_TRUE(verify_checkpoint(dir, back).empty());
}

TEST(ChunkFiles, DamageIsNamedByFile) {
  const std::string dir = temp_dir("damage");
  std::vector<float> x(1000);
  std::iota(x.begin(), x.end(), 0.0f);
  CheckpointIndex index;
  index.meta["format"] = kCheckpointFormat;
  write_chunk_file(dir, "rank-00000.bin", {{"x", DType::f32, {1000}, whole_box({1000}), x.data()}}, index);
  index.write(dir);
  std::vector<float> y(1000);
  const std::vector<ChunkTarget> all{{"x", DType::f32, {1000}, whole_box({1000}), y.data()}};
  auto damage_of = [&]() -> std::string {
    try {
      read_chunks(dir, CheckpointIndex::read(dir), all);
    } catch (const CheckpointDamaged& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(damage_of(), "");
  {  // one flipped byte in the middle of the data
    std::fstream f(dir + "/rank-00000.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2001);
    f.put(char(0x5a));
  }
  EXPECT_NE(damage_of().find("rank-00000.bin: the chunk at bytes 0..4000 fails its checksum"), std::string::npos)
      << damage_of();
  EXPECT_EQ(verify_checkpoint(dir, CheckpointIndex::read(dir)).size(), 1u);
  fs::resize_file(dir + "/rank-00000.bin", 3000);
  EXPECT_NE(damage_of().find("rank-00000.bin is 3000 bytes, the index says 4000"), std::string::npos) << damage_of();
  fs::remove(dir + "/index.json");
  EXPECT_NE(damage_of().find("index.json is missing"), std::string::npos) << damage_of();
  write_file_atomic(dir + "/index.json", "{\"format\": \"dtrain-checkpoint-2\", \"files\": {}, \"tensors\": 3}");
  EXPECT_NE(damage_of(), "");
}

TEST(ModelCheckpoint, FullRoundTripIsExactAndAnotherModelIsRefused) {
  const std::string dir = temp_dir("model") + "/ck";
  Model a(transformer_units(tiny()), 2);
  a.init_weights(3);
  Optimizer oa(OptimizerConfig{}, unit_shards(a.units()));
  for (Unit* u : a.units())
    for (const ParamInfo& p : u->params())
      for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) u->grad_data()[i] = 0.01f * float(i % 7) - 0.02f;
  oa.step(0.01f);
  World world(DistEnv{}, Millis(10000));
  for (bool sharded : {false, true}) {
    CheckpointWriter w(world.all(), 10.0);
    TrainerState st;
    st.global_step = 2;
    st.samples_in_epoch = 64;
    SaveRequest r;
    r.dir = dir;
    r.model = to_model_config(tiny());
    r.sharded = sharded;
    r.state = &st;
    r.saved_from = {{"world", 1}, {"pp", 1}, {"dp_replicate", 1}, {"dp_shard", 1}, {"tp", 1}};
    w.save(r, a, nullptr, &oa);
    Model b(transformer_units(tiny()), 2);
    b.init_weights(4);
    Optimizer ob(OptimizerConfig{}, unit_shards(b.units()));
    TrainerState sb;
    RankState held(b, nullptr, &ob);
    const LoadReport rep = load_checkpoint(dir, to_model_config(tiny()), held, &ob, &sb);
    EXPECT_EQ(rep.step, 2);
    EXPECT_EQ(sb.samples_in_epoch, 64);
    EXPECT_EQ(ob.steps_taken(), 1);
    for (size_t k = 0; k < a.units().size(); ++k)  // parameter by parameter (not the alignment gaps)
      for (const ParamInfo& p : a.units()[k]->params())
        ASSERT_EQ(0, std::memcmp(a.units()[k]->param_data() + p.offset, b.units()[k]->param_data() + p.offset,
                                 sizeof(float) * size_t(p.numel())))
            << p.name << (sharded ? " (sharded)" : " (full)");
    auto sa = oa.state(), sbv = ob.state();
    for (size_t i = 0; i < sa.size(); ++i)
      for (const ParamInfo& p : a.units()[sa[i].shard]->params())
        ASSERT_EQ(0, std::memcmp(sa[i].data + p.offset, sbv[i].data + p.offset, sizeof(float) * size_t(p.numel())))
            << sa[i].name << " " << p.name;
    EXPECT_EQ(fs::exists(dir + "/model.safetensors"), !sharded);
  }
  Model other(transformer_units(tiny(32)), 2);
  try {
    load_weights(dir, to_model_config(tiny(32)), other);
    FAIL() << "another model's checkpoint was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was written for a different model (model.dim 16 vs 32)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelCheckpoint, NewestFirstAndPruning) {
  const std::string run = temp_dir("prune");
  for (const char* n : {"step_000000002", "step_000000010", "step_000000005", "step_000000011.staging.77"})
    fs::create_directories(run + "/checkpoints/" + n);
  const std::vector<std::string> got = checkpoints_newest_first(run);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_NE(got[0].find("step_000000010"), std::string::npos);
  EXPECT_NE(got[2].find("step_000000002"), std::string::npos);
  prune_checkpoints(run, 2);
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000000002"));
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000000011.staging.77"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000000005"));
  EXPECT_TRUE(checkpoints_newest_first(temp_dir("empty")).empty());
}
