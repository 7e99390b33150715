// CheckpointWriter (see checkpoint_writer.hpp).
#include "train/checkpoint/checkpoint_writer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "ckpt/chunk_io.hpp"
#include "ckpt/safetensors.hpp"
#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/trace.hpp"
#include "models/registry.hpp"
#include "train/config.hpp"
#include "train/checkpoint/tp_boxes.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string numbered(const char* stem, int rank, const char* ext) {
  char b[64];
  std::snprintf(b, sizeof b, "%s-%05d%s", stem, rank, ext);
  return b;
}

// The index's description of the checkpoint (everything but tensors and files).
Json index_meta(const SaveRequest& r, const Optimizer* opt) {
  Json m = Json::object();
  m["format"] = kCheckpointFormat;
  m["step"] = r.state ? r.state->global_step : 0;
  m["model"] = model_to_json(r.model);
  m["optimizer"] = r.with_optimizer && opt ? Json{{"name", opt->config().name}, {"steps", opt->steps_taken()}}
                                           : Json(nullptr);
  m["saved_from"] = r.saved_from;
  m["saved_from"]["format"] = r.sharded ? "sharded" : "full";
  return m;
}

}  // namespace

CheckpointWriter::CheckpointWriter(ProcessGroup& all, double timeout_s) : all_(all), timeout_s_(timeout_s) {}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: error: the last checkpoint was not written: %s\n", e.what());
  }
}

double CheckpointWriter::wait() {
  if (!worker_.joinable()) return 0.0;
  worker_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return write_seconds_;
}

void CheckpointWriter::write_part(const std::string& staged, const std::vector<ChunkSource>& sources) const {
  TraceScope traced("checkpoint", "write " + std::filesystem::path(staged).filename().string());
  CheckpointIndex part;
  part.meta["format"] = kCheckpointFormat;
  write_chunk_file(staged, numbered("rank", all_.rank(), ".bin"), sources, part);
  write_file_atomic(staged + "/" + numbered("part", all_.rank(), ".json"), part.to_json().dump());
}

void CheckpointWriter::commit(const SaveRequest& r, const std::string& staged, CheckpointIndex index,
                              bool wait_for_parts) const {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int rank = 0; wait_for_parts && rank < all_.size(); ++rank) {
    const std::string path = staged + "/" + numbered("part", rank, ".json");
    while (!fs::exists(path)) {
      require(Clock::now() < deadline, "checkpoint " + r.dir + ": rank " + std::to_string(rank) +
                                           " did not write its part within " + std::to_string(int(timeout_s_)) +
                                           " s (parallel.timeout_s): it died or its disk is full");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const CheckpointIndex part = CheckpointIndex::from_json(parse_json(read_file(path), path), path);
    for (const auto& [name, t] : part.tensors)
      for (const ChunkRecord& c : t.chunks) index.add(name, t.dtype, t.shape, c);
    for (const auto& [name, f] : part.files) index.files[name] = f;
    fs::remove(path);
  }
  if (fs::exists(staged + "/trainer.json")) index.add_file(staged, "trainer.json");
  if (!r.kept_path.empty()) index.add_file(staged, r.kept_name);
  index.write(staged);
  fs::create_directories(fs::path(r.dir).parent_path().empty() ? fs::path(".") : fs::path(r.dir).parent_path());
  replace_dir_atomic(staged, r.dir);
  if (r.after_commit) r.after_commit();
}

namespace {

// fn(region, box `from` whose data holds it, where that data starts within the slice's) for each
// part tensor-parallel slice s holds of `piece` of p, in a fixed order (sender and receiver share it).
template <class Fn>
void parts_of(const ParamInfo& p, int s, const Box& piece, Fn&& fn) {
  const ParamInfo q = as_slice(p, s);
  for (const auto& [global, within] : global_boxes(q, whole_box(q.shape)))
    if (const std::optional<Box> common = intersect(global, piece)) fn(*common, global, within);
}

size_t volume_of(const ParamInfo& p, int s, const Box& piece) {
  size_t n = 0;
  parts_of(p, s, piece, [&](const Box& region, const Box&, int64_t) { n += size_t(region.volume()); });
  return n;
}

// The full format's files as units are appended to them: rank 0 appends each tensor to its file
// (model.safetensors, optimizer.safetensors) and indexes it by chunks. Under tensor parallelism a
// parameter every slice holds whole is rank 0's; a cut one is joined by rank 0 one chunk of the
// global tensor at a time (the chunks the index records), each slice of rank 0's tp group sending
// its part of the chunk, so no rank holds more than a chunk or two beside the model.
class FullFileAppender {
 public:
  FullFileAppender(CheckpointIndex& index, ProcessGroup* tp) : index_(index), tp_(tp) {
    slices_ = tp ? tp->size() : 1;
    joins_ = slices_ > 1 && tp->ranks()[0] == 0;  // this tp group holds rank 0, which writes
    me_ = slices_ > 1 ? tp->rank() : 0;
  }

  // Unit u's tensors from `whole` (its parameters, or one optimizer family of them), named with
  // `prefix`; out: rank 0's writer of `file`, null on the other ranks.
  void append(SafetensorsWriter* out, const std::string& file, const Unit& u, const std::string& prefix,
              const float* whole) {
    for (const ParamInfo& p : u.params()) {
      const float* data = whole + p.offset;
      if (!p.is_cut() || !joins_) {
        if (out) append_whole(*out, file, prefix + p.name, p, data);
        continue;
      }
      for (const Box& piece : split_box(whole_box(p.global_shape), kMaxChunkBytes / int64_t(sizeof(float)))) {
        if (out)
          join_chunk(*out, file, prefix + p.name, p, piece, data);
        else
          send_part(p, piece, data);
      }
    }
  }
  size_t buffer_bytes() const { return sizeof(float) * (chunk_.capacity() + part_.capacity()); }

 private:
  void append_whole(SafetensorsWriter& out, const std::string& file, const std::string& name, const ParamInfo& p,
                    const float* data) {
    const Box box = whole_box(p.global_shape);
    const int64_t at = int64_t(out.append(data));
    for_each_piece(box, data, sizeof(float), kMaxChunkBytes, [&](const Box& piece, const char* b, size_t n) {
      const int64_t off = at + offset_within(box, piece) * int64_t(sizeof(float));
      index_.add(name, DType::f32, p.global_shape, {piece, file, off, int64_t(n), crc32c(b, n)});
    });
  }

  // A slice: its part of the chunk, packed, to rank 0.
  void send_part(const ParamInfo& p, const Box& piece, const float* data) {
    part_.resize(volume_of(p, me_, piece));
    if (part_.empty()) return;
    size_t n = 0;
    parts_of(p, me_, piece, [&](const Box& region, const Box& from, int64_t within) {
      copy_region(data + within, from, part_.data() + n, region, region, sizeof(float));
      n += size_t(region.volume());
    });
    tp_->send_async(part_.data(), sizeof(float) * n, 0)->wait();
  }

  // Rank 0: the chunk from its own part and every other slice's, appended and indexed.
  void join_chunk(SafetensorsWriter& out, const std::string& file, const std::string& name, const ParamInfo& p,
                  const Box& piece, const float* data) {
    chunk_.resize(size_t(piece.volume()));
    parts_of(p, 0, piece, [&](const Box& region, const Box& from, int64_t within) {
      copy_region(data + within, from, chunk_.data(), piece, region, sizeof(float));
    });
    for (int s = 1; s < slices_; ++s) {
      part_.resize(volume_of(p, s, piece));
      if (part_.empty()) continue;
      tp_->recv_async(part_.data(), sizeof(float) * part_.size(), s)->wait();
      size_t n = 0;
      parts_of(p, s, piece, [&](const Box& region, const Box&, int64_t) {
        copy_region(part_.data() + n, region, chunk_.data(), piece, region, sizeof(float));
        n += size_t(region.volume());
      });
    }
    const size_t bytes = sizeof(float) * chunk_.size();
    const int64_t at = int64_t(out.append_part(chunk_.data(), bytes));
    index_.add(name, DType::f32, p.global_shape, {piece, file, at, int64_t(bytes), crc32c(chunk_.data(), bytes)});
  }

  CheckpointIndex& index_;
  ProcessGroup* tp_;
  int slices_ = 1, me_ = 0;
  bool joins_ = false;
  std::vector<float> chunk_, part_;  // rank 0: a chunk being joined and a slice's part of it; a slice: its part
};

}  // namespace

void CheckpointWriter::save_full(const SaveRequest& r, const std::string& staged, Model& model,
                                 FullyShardedDataParallel* fsdp, Optimizer* opt, CheckpointIndex& index) {
  const bool root = all_.rank() == 0;
  const std::vector<Unit*>& units = model.units();
  std::vector<std::vector<Optimizer::StateView>> state(units.size());  // per unit, its families
  if (r.with_optimizer && opt)
    for (const Optimizer::StateView& s : opt->state()) state[s.shard].push_back(s);
  std::vector<SafeTensorSpec> model_specs, opt_specs;
  for (size_t k = 0; k < units.size(); ++k) {
    for (const ParamInfo& p : units[k]->params()) model_specs.push_back({p.name, DType::f32, p.global_shape});
    for (const auto& s : state[k])
      for (const ParamInfo& p : units[k]->params())
        opt_specs.push_back({RankState::optimizer_tensor(s.family, p.name), DType::f32, p.global_shape});
  }
  std::unique_ptr<SafetensorsWriter> weights, optim;
  if (root) {
    weights = std::make_unique<SafetensorsWriter>(staged + "/model.safetensors", model_specs,
                                                  weights_metadata(r.model));
    if (!opt_specs.empty())
      optim = std::make_unique<SafetensorsWriter>(staged + "/optimizer.safetensors", opt_specs,
                                                  std::map<std::string, std::string>{{"format", kCheckpointFormat}});
  }
  // Unit by unit: gathered (under FSDP, by every rank, into its gather pool) and written by rank 0.
  FullFileAppender files(index, r.tp);
  const float* host = fsdp ? nullptr : model.host_params();
  for (size_t k = 0; k < units.size(); ++k) {
    const Unit& u = *units[k];
    files.append(weights.get(), "model.safetensors", u, "", fsdp ? fsdp->gather_full(k) : host + model.offset_of(u));
    for (const auto& s : state[k])
      files.append(optim.get(), "optimizer.safetensors", u, "optimizer." + s.family + ".",
                   fsdp ? fsdp->gather_full(k, s.data) : s.data);
  }
  note_buffers(files.buffer_bytes());
  if (!root) return;
  weights->commit();
  index.add_data_file(staged, "model.safetensors", weights->data_start());
  if (optim) {
    optim->commit();
    index.add_data_file(staged, "optimizer.safetensors", optim->data_start());
  }
}

SaveReport CheckpointWriter::save(const SaveRequest& r, Model& model, FullyShardedDataParallel* fsdp,
                                  Optimizer* opt) {
  const auto t0 = Clock::now();
  wait();
  const bool root = all_.rank() == 0;
  // Every rank writes into rank 0's staging folder.
  int64_t pid = root ? int64_t(::getpid()) : 0;
  all_.broadcast(&pid, 1, ElemType::i64, 0);
  const std::string staged = r.dir + ".staging." + std::to_string(pid);
  if (root) {
    remove_leftovers_of(r.dir);
    fs::create_directories(staged);
    if (r.state) {
      Json t = r.state->to_json();
      t["config"] = r.run_config;
      write_file_atomic(staged + "/trainer.json", t.dump(2));
    }
    if (!r.kept_path.empty()) write_file_atomic(staged + "/" + r.kept_name, read_file(r.kept_path));
  }
  all_.barrier();
  CheckpointIndex index;
  if (root) index.meta = index_meta(r, opt);
  SaveReport rep;
  if (!r.sharded) {
    save_full(r, staged, model, fsdp, opt, index);
    rep.bytes = root ? index.data_bytes() : 0;
    all_.barrier();
    if (root) commit(r, staged, std::move(index), false);
    all_.barrier();  // the checkpoint is in place before anyone goes on
    rep.stall_seconds = since(t0);
    return rep;
  }
  RankState held(model, fsdp, r.with_optimizer ? opt : nullptr, r.tp_slice);
  std::vector<ChunkSource> sources = held.save_sources({r.part, r.parts}, {r.expert_part, r.expert_parts});
  int64_t own = 0;  // this rank's share
  for (const ChunkSource& s : sources) own += s.box.volume() * int64_t(dtype_size(s.dtype));
  rep.bytes = own;
  all_.allreduce(&rep.bytes, 1, ElemType::i64, ReduceOp::sum);
  if (!r.async) {
    write_part(staged, sources);
    all_.barrier();  // every rank's file is written and synced
    if (root) commit(r, staged, std::move(index), true);
    all_.barrier();
    rep.stall_seconds = since(t0);
    return rep;
  }
  // Background: this rank's share copied to host memory, written by a thread; rank 0's thread then
  // waits for every rank's part and commits. Training goes on meanwhile.
  staging_.resize(size_t(own));
  note_buffers(0);
  size_t at = 0;
  for (ChunkSource& s : sources) {
    const size_t n = size_t(s.box.volume()) * dtype_size(s.dtype);
    std::memcpy(staging_.data() + at, s.data, n);
    s.data = staging_.data() + at;
    at += n;
  }
  worker_ = std::thread([this, r, staged, sources = std::move(sources), index = std::move(index), root]() mutable {
    const auto w0 = Clock::now();
    // Testing: hold the write back so a test can kill the job while a background save is in flight.
    if (const char* d = std::getenv("DTRAIN_TEST_CKPT_WRITE_DELAY_MS"))
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
    try {
      write_part(staged, sources);
      if (root) commit(r, staged, std::move(index), true);
    } catch (...) {
      error_ = std::current_exception();
    }
    write_seconds_ = since(w0);
  });
  rep.stall_seconds = since(t0);
  return rep;
}

}  // namespace dtrain
