// safetensors writer and validating reader (see safetensors.hpp). Little-endian hosts only.
#include "ckpt/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

namespace dtrain {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts are not supported");

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // same limit as the reference implementation

bool parse_dtype(const std::string& s, DType* out) {
  for (DType t : {DType::f32, DType::bf16, DType::i32}) {
    if (s == dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// numel * elem_size, or false on overflow past 2^62.
bool checked_nbytes(const std::vector<int64_t>& shape, size_t elem, uint64_t* out) {
  unsigned __int128 n = elem;
  for (int64_t d : shape) {
    n *= static_cast<uint64_t>(d);
    if (n > (unsigned __int128)(1ull << 62)) return false;
  }
  *out = static_cast<uint64_t>(n);
  return true;
}

std::string single_quoted(const std::string& s) { return "'" + s + "'"; }

// A shape entry or data offset: an integer in [0, 2^53] (as the reference reader, no 24.0).
bool is_index(const Json& d) {
  return d.is_number_unsigned() ? d.get<uint64_t>() <= (1ull << 53)
                                : d.is_number_integer() && d.get<int64_t>() >= 0 &&
                                      d.get<int64_t>() <= (int64_t(1) << 53);
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafeTensorSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), specs_(std::move(specs)) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  nbytes_.reserve(specs_.size());
  uint64_t offset = 0;
  for (const SafeTensorSpec& t : specs_) {
    require(!t.name.empty(), "cannot write " + path + ": a tensor has an empty name; name it");
    require(t.name != "__metadata__",
            "cannot write " + path + ": '__metadata__' is reserved; rename that tensor");
    require(seen.insert(t.name).second, "cannot write " + path + ": tensor " + single_quoted(t.name) +
                                            " appears twice; give each tensor a unique name");
    Json shape = Json::array();
    for (int64_t d : t.shape) {
      require(d >= 0, "cannot write " + path + ": tensor " + single_quoted(t.name) + " has shape " +
                          shape_str(t.shape) + " with a negative dimension; fix the shape");
      shape.push_back(d);
    }
    uint64_t nbytes = 0;
    require(checked_nbytes(t.shape, dtype_size(t.dtype), &nbytes),
            "cannot write " + path + ": tensor " + single_quoted(t.name) + " shape " +
                shape_str(t.shape) + " is too large; fix the shape");
    Json entry = Json::object();
    entry["dtype"] = dtype_name(t.dtype);
    entry["shape"] = std::move(shape);
    Json offsets = Json::array();
    offsets.push_back(offset);
    offsets.push_back(offset + nbytes);
    entry["data_offsets"] = std::move(offsets);
    header[t.name] = std::move(entry);
    offset += nbytes;
    nbytes_.push_back(nbytes);
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t len_le[8];
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) len_le[i] = uint8_t(n >> (8 * i));
  file_.emplace(path_);
  file_->write(len_le, 8);
  file_->write(header_text);
  at_ = data_start_ = 8 + n;
}

const SafeTensorSpec& SafetensorsWriter::next() const {
  DT_ASSERT(next_ < specs_.size());
  return specs_[next_];
}

uint64_t SafetensorsWriter::append(const void* data) {
  require(next_ < specs_.size(), "cannot write " + path_ + ": a tensor was appended after all " +
                                     std::to_string(specs_.size()) +
                                     " declared tensors; declare every tensor in the specs");
  const SafeTensorSpec& t = specs_[next_];
  const uint64_t nbytes = nbytes_[next_];
  require(nbytes == 0 || data != nullptr, "cannot write " + path_ + ": tensor " +
                                              single_quoted(t.name) +
                                              " has no data pointer; pass its memory");
  DT_ASSERT(file_.has_value() && part_ == 0);
  file_->write(data, size_t(nbytes));
  ++next_;
  const uint64_t where = at_;
  at_ += nbytes;
  return where;
}

uint64_t SafetensorsWriter::append_part(const void* data, size_t bytes) {
  require(next_ < specs_.size(), "cannot write " + path_ + ": a tensor was appended after all " +
                                     std::to_string(specs_.size()) +
                                     " declared tensors; declare every tensor in the specs");
  const SafeTensorSpec& t = specs_[next_];
  const uint64_t left = nbytes_[next_] - part_;
  require(bytes <= left, "cannot write " + path_ + ": " + std::to_string(bytes) + " bytes given for tensor " +
                             single_quoted(t.name) + ", which has " + std::to_string(left) +
                             " left; give each tensor exactly its size");
  require(bytes == 0 || data != nullptr, "cannot write " + path_ + ": tensor " + single_quoted(t.name) +
                                             " has no data pointer; pass its memory");
  DT_ASSERT(file_.has_value());
  file_->write(data, bytes);
  const uint64_t where = at_;
  at_ += bytes;
  part_ += bytes;
  if (part_ == nbytes_[next_]) {
    ++next_;
    part_ = 0;
  }
  return where;
}

void SafetensorsWriter::commit() {
  if (!done()) {
    throw Error("cannot write " + path_ + ": commit after " + std::to_string(next_) + " of " +
                std::to_string(specs_.size()) + " tensors; append tensor " +
                single_quoted(specs_[next_].name) + " and the rest first");
  }
  DT_ASSERT(file_.has_value());
  file_->commit();
}

std::vector<SafeTensorSpec> specs_of(const std::vector<SafeTensorView>& tensors) {
  std::vector<SafeTensorSpec> specs;
  specs.reserve(tensors.size());
  for (const SafeTensorView& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  return specs;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer(path, specs_of(tensors), metadata);
  for (const SafeTensorView& t : tensors) writer.append(t.data);
  writer.commit();
}

namespace {

const char kDamaged[] = "the file is damaged or not a safetensors file; use another checkpoint";

// The file's header (checked to be a JSON object of at most kMaxHeader bytes that the file holds
// whole) and its length in bytes.
Json read_header(const std::string& path, const std::string& b, uint64_t* length) {
  require(b.size() >= 8, "checkpoint " + path + " is too short (" + std::to_string(b.size()) +
                             " bytes, need at least 8): " + kDamaged);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<uint8_t>(b[size_t(i)])) << (8 * i);
  require(n <= b.size() - 8,
          "checkpoint " + path + " is truncated or corrupt (its length field announces a " +
              std::to_string(n) + "-byte header but only " + std::to_string(b.size() - 8) +
              " bytes follow): " + kDamaged);
  require(n <= kMaxHeader, "checkpoint " + path + " has a " + std::to_string(n) +
                               "-byte header, over the 100 MiB limit: " + kDamaged);
  Json header;
  try {
    header = parse_json(std::string_view(b).substr(8, size_t(n)), "the header");
  } catch (const Error& e) {
    throw Error("checkpoint " + path + " has a corrupt header (" + e.what() + "): " + kDamaged);
  }
  require(header.is_object(),
          "checkpoint " + path + " header is a JSON " + header.type_name() +
              ", expected an object: " + kDamaged);
  *length = n;
  return header;
}

// The header's __metadata__: an object of strings.
void read_metadata(const std::string& path, const Json& info, std::map<std::string, std::string>& metadata) {
  require(info.is_object(), "checkpoint " + path + ": __metadata__ is a " + info.type_name() +
                                ", expected an object of strings: " + kDamaged);
  for (const auto& [k, v] : info.items()) {
    require(v.is_string(), "checkpoint " + path + ": __metadata__ entry " + single_quoted(k) +
                               " is a " + v.type_name() + ", expected a string: " + kDamaged);
    metadata[k] = v.get<std::string>();
  }
}

// A tensor's header entry, checked, and where its bytes lie in the data section.
struct TensorEntry {
  SafeTensorView view;
  uint64_t begin = 0, end = 0;
};

// `where`: the file and the tensor, for messages.
void read_dtype_and_shape(const std::string& where, const Json& dt, const Json& sh, SafeTensorView& v) {
  require(dt.is_string(), where + ": dtype is not a string: " + kDamaged);
  const std::string& dtype = dt.get_ref<const std::string&>();
  require(parse_dtype(dtype, &v.dtype),
          where + " has dtype " + dtype +
              ", which dtrain does not read (F32, BF16, I32); convert the checkpoint to one of "
              "those dtypes");
  require(sh.is_array(), where + ": shape is not an array: " + kDamaged);
  for (const Json& d : sh) {
    require(is_index(d), where + ": shape " + sh.dump() +
                             " has an entry that is not a non-negative integer: " + kDamaged);
    v.shape.push_back(d.get<int64_t>());
  }
}

// Tensor `name`'s entry: its dtype, shape and data offsets, which must match its size and lie
// within the data section (data, data_size bytes).
TensorEntry read_entry(const std::string& path, const std::string& name, const Json& info, const char* data,
                       uint64_t data_size) {
  const std::string where = "checkpoint " + path + ", tensor " + single_quoted(name);
  require(info.is_object(), where + ": entry is a " + std::string(info.type_name()) +
                                ", expected an object: " + kDamaged);
  require(info.contains("dtype") && info.contains("shape") && info.contains("data_offsets"),
          where + ": entry lacks dtype, shape or data_offsets: " + kDamaged);
  const Json& off = info["data_offsets"];
  TensorEntry e;
  SafeTensorView& v = e.view;
  v.name = name;
  read_dtype_and_shape(where, info["dtype"], info["shape"], v);
  const std::string& dtype = info["dtype"].get_ref<const std::string&>();
  uint64_t nbytes = 0;
  require(checked_nbytes(v.shape, dtype_size(v.dtype), &nbytes),
          where + ": shape " + shape_str(v.shape) + " is impossibly large: " + kDamaged);
  require(off.is_array() && off.size() == 2 && is_index(off[0]) && is_index(off[1]),
          where + ": data_offsets " + off.dump() +
              " is not a pair of non-negative integers: " + kDamaged);
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  require(e.begin <= e.end && e.end - e.begin == nbytes,
          where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
              "] do not match shape " + shape_str(v.shape) + " " + dtype + " (" +
              std::to_string(nbytes) + " bytes): " + kDamaged);
  require(e.end <= data_size,
          "checkpoint " + path + " is truncated (tensor " + single_quoted(name) + " ends at data byte " +
              std::to_string(e.end) + ", file has " + std::to_string(data_size) +
              " data bytes): the file is damaged (interrupted copy or write); use another "
              "checkpoint");
  v.data = data + e.begin;
  return e;
}

// The entries in file order (= data order); neighbouring tensors must not overlap.
std::vector<SafeTensorView> in_data_order(const std::string& path, std::vector<TensorEntry> found) {
  std::vector<size_t> order(found.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return found[a].begin != found[b].begin ? found[a].begin < found[b].begin : found[a].end < found[b].end;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    require(found[order[i]].begin >= found[order[i - 1]].end,
            "checkpoint " + path + ": tensors " + single_quoted(found[order[i - 1]].view.name) + " and " +
                single_quoted(found[order[i]].view.name) + " overlap in the data section: " + kDamaged);
  }
  std::vector<SafeTensorView> tensors;
  tensors.reserve(found.size());
  for (size_t i : order) tensors.push_back(std::move(found[i].view));
  return tensors;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  bytes_ = std::make_unique<std::string>(read_file(path, SIZE_MAX));  // a regular file: any size
  const std::string& b = *bytes_;
  uint64_t n = 0;
  const Json header = read_header(path, b, &n);
  const char* data = b.data() + 8 + n;
  const uint64_t data_size = b.size() - 8 - n;
  std::vector<TensorEntry> found;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__")
      read_metadata(path, info, metadata_);
    else
      found.push_back(read_entry(path, name, info, data, data_size));
  }
  tensors_ = in_data_order(path, std::move(found));
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.name);
  return out;
}

const SafeTensorView& SafetensorsFile::get(const std::string& name) const {
  auto it = index_.find(name);
  require(it != index_.end(), "checkpoint " + path_ + " has no tensor " + single_quoted(name) +
                                  " (it has " + std::to_string(tensors_.size()) +
                                  " tensors); use a checkpoint written for this model");
  return tensors_[it->second];
}

void SafetensorsFile::read_into(const std::string& name, DType dtype,
                                const std::vector<int64_t>& shape, void* dst) const {
  const SafeTensorView& t = get(name);
  require(t.dtype == dtype && t.shape == shape,
          "cannot load tensor " + single_quoted(name) + " from " + path_ + ": the checkpoint has " +
              dtype_name(t.dtype) + " " + shape_str(t.shape) + " but " + dtype_name(dtype) + " " +
              shape_str(shape) + " is expected; use a checkpoint written with the same model "
              "config");
  size_t nbytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (nbytes) std::memcpy(dst, t.data, nbytes);
}

}  // namespace dtrain
