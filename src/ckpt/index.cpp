// index.json of a checkpoint folder (see index.hpp).
#include "ckpt/index.hpp"

#include <filesystem>
#include <fstream>

#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"

namespace dtrain {

DType dtype_from_name(const std::string& name, const std::string& source) {
  for (DType t : {DType::f32, DType::bf16, DType::i32})
    if (name == dtype_name(t)) return t;
  throw CheckpointDamaged(source + ": unknown dtype " + name + " (F32, BF16 or I32)");
}

Json CheckpointIndex::to_json() const {
  Json j = meta;
  Json ts = Json::object();
  for (const auto& [name, t] : tensors) {
    Json chunks = Json::array();
    for (const ChunkRecord& c : t.chunks)
      chunks.push_back({{"offsets", c.box.offsets}, {"sizes", c.box.sizes}, {"file", c.file},
                        {"byte_offset", c.byte_offset}, {"byte_size", c.byte_size}, {"crc32c", c.crc32c}});
    ts[name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"chunks", std::move(chunks)}};
  }
  Json fs = Json::object();
  for (const auto& [name, f] : files) {
    fs[name] = {{"bytes", f.bytes}};
    if (f.has_crc) fs[name]["crc32c"] = f.crc32c;
    if (f.header_bytes > 0) {
      fs[name]["header_bytes"] = f.header_bytes;
      fs[name]["header_crc32c"] = f.header_crc32c;
    }
  }
  j["files"] = std::move(fs);
  j["tensors"] = std::move(ts);
  return j;
}

CheckpointIndex CheckpointIndex::from_json(const Json& j, const std::string& source) {
  try {
    CheckpointIndex idx;
    require(j.is_object(), source + " is not a JSON object");
    require(json_get<std::string>(j, "format", source) == kCheckpointFormat,
            source + ": format is not " + kCheckpointFormat);
    for (const auto& [k, v] : j.items())
      if (k != "tensors" && k != "files") idx.meta[k] = v;
    for (const auto& [name, f] : json_at(j, "files", source).items()) {
      const std::string at = "files." + name;
      FileRecord r;
      r.bytes = json_get<int64_t>(f, "bytes", source + " " + at);
      r.has_crc = f.contains("crc32c");
      if (r.has_crc) r.crc32c = uint32_t(json_get<int64_t>(f, "crc32c", source + " " + at));
      if (f.contains("header_bytes")) {
        r.header_bytes = json_get<int64_t>(f, "header_bytes", source + " " + at);
        r.header_crc32c = uint32_t(json_get<int64_t>(f, "header_crc32c", source + " " + at));
      }
      idx.files[name] = r;
    }
    for (const auto& [name, t] : json_at(j, "tensors", source).items()) {
      const std::string at = source + " tensor " + name;
      TensorRecord r;
      r.dtype = dtype_from_name(json_get<std::string>(t, "dtype", at), at);
      r.shape = json_at(t, "shape", at).get<std::vector<int64_t>>();
      for (const Json& c : json_at(t, "chunks", at)) {
        ChunkRecord cr;
        cr.box.offsets = json_at(c, "offsets", at).get<std::vector<int64_t>>();
        cr.box.sizes = json_at(c, "sizes", at).get<std::vector<int64_t>>();
        cr.file = json_get<std::string>(c, "file", at);
        cr.byte_offset = json_get<int64_t>(c, "byte_offset", at);
        cr.byte_size = json_get<int64_t>(c, "byte_size", at);
        cr.crc32c = uint32_t(json_get<int64_t>(c, "crc32c", at));
        const Box whole = whole_box(r.shape);
        require(cr.box.offsets.size() == whole.sizes.size() && cr.box.sizes.size() == whole.sizes.size() &&
                    intersect(cr.box, whole) == cr.box &&
                    cr.byte_size == cr.box.volume() * int64_t(dtype_size(r.dtype)) && cr.byte_offset >= 0 &&
                    idx.files.count(cr.file),
                at + ": a chunk lies outside the tensor, or its byte size or file does not fit");
        r.chunks.push_back(std::move(cr));
      }
      idx.tensors[name] = std::move(r);
    }
    return idx;
  } catch (const CheckpointDamaged&) {
    throw;
  } catch (const std::exception& e) {  // Error from json_get, nlohmann type errors
    throw CheckpointDamaged(e.what());
  }
}

void require_present(const std::string& path, const std::string& why_missing) {
  std::error_code ec;
  const bool there = std::filesystem::exists(path, ec);  // a symbolic link that loops: ec, not a throw
  if (ec) throw CheckpointDamaged(path + " cannot be read (" + ec.message() + "): the checkpoint is damaged");
  if (!there) throw CheckpointDamaged(path + " is missing (" + why_missing + ")");
}

CheckpointIndex CheckpointIndex::read(const std::string& dir) {
  const std::string path = dir + "/index.json";
  require_present(path, "the checkpoint is incomplete or not a dtrain checkpoint");
  std::string text;
  try {
    text = read_file(path);
  } catch (const ResourceExhausted&) {
    throw;  // out of descriptors or memory: this process's problem, not the checkpoint's
  } catch (const Error& e) {
    throw CheckpointDamaged(e.what());
  }
  Json j;
  try {
    j = parse_json(text, path);
  } catch (const Error& e) {
    throw CheckpointDamaged(e.what());
  }
  CheckpointIndex index = from_json(j, path);
  const std::vector<std::string> problems = index.tiling_problems(path);
  if (!problems.empty())
    throw CheckpointDamaged(problems[0] + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                                                     " more tensors like it)"
                                                               : "") +
                            ": the index is damaged");
  return index;
}

std::vector<std::string> CheckpointIndex::tiling_problems(const std::string& source) const {
  std::vector<std::string> out;
  std::vector<Box> boxes;
  for (const auto& [name, t] : tensors) {
    boxes.clear();
    for (const ChunkRecord& c : t.chunks) boxes.push_back(c.box);
    const std::string why = tiling_problem(whole_box(t.shape), boxes);
    if (!why.empty()) out.push_back(source + ": the chunks of " + name + " do not tile it: " + why);
  }
  return out;
}

void CheckpointIndex::write(const std::string& dir) const { write_file_atomic(dir + "/index.json", to_json().dump(1)); }

void CheckpointIndex::add(const std::string& tensor, DType dtype, const std::vector<int64_t>& shape,
                          ChunkRecord chunk) {
  auto [it, fresh] = tensors.try_emplace(tensor);
  if (fresh) {
    it->second.dtype = dtype;
    it->second.shape = shape;
  }
  DT_ASSERT(it->second.dtype == dtype && it->second.shape == shape);
  it->second.chunks.push_back(std::move(chunk));
}

void CheckpointIndex::add_file(const std::string& dir, const std::string& name) {
  const std::string bytes = read_file(dir + "/" + name);
  files[name] = {int64_t(bytes.size()), true, crc32c(bytes.data(), bytes.size())};
}

void CheckpointIndex::add_data_file(const std::string& dir, const std::string& name, int64_t header_bytes) {
  const std::string path = dir + "/" + name;
  std::string header(size_t(header_bytes), '\0');  // only the header is read back
  std::ifstream in(path, std::ios::binary);
  require(bool(in.read(header.data(), header_bytes)), "cannot read the header of " + path + " just written");
  files[name] = {int64_t(std::filesystem::file_size(path)), false, 0, header_bytes,
                 crc32c(header.data(), header.size())};
}

int64_t CheckpointIndex::data_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors)
    for (const ChunkRecord& c : t.chunks) n += c.byte_size;
  return n;
}

}  // namespace dtrain
