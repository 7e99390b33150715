// HDF5 corpus files (libhdf5's C API) in slabs: a document per element of a 1-D string dataset; ids
// already tokenized in an integer dataset (1-D: one document, 2-D: one per row), checked against the vocabulary.
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "data/corpus_reader.hpp"

namespace dtrain {

namespace {

constexpr size_t kSlabBytes = size_t(4) << 20;  // about this much is read from the file at a time

// An HDF5 identifier closed by its own function when it goes out of scope.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The file's top-level names, for the messages that ask for --dataset.
std::string top_level_names(hid_t file) {
  std::vector<std::string> names;
  auto add = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, add, &names);
  std::string s;
  for (size_t i = 0; i < names.size() && i < 10; ++i) s += (i ? ", " : "") + names[i];
  return s.empty() ? "nothing" : s;
}

std::string class_name(H5T_class_t c) {
  switch (c) {
    case H5T_FLOAT: return "floating-point";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_ENUM: return "enum";
    case H5T_OPAQUE: return "opaque";
    case H5T_BITFIELD: return "bitfield";
    case H5T_REFERENCE: return "reference";
    default: return "unknown";
  }
}

// The dataset being read and where its documents go.
struct Hdf5Source {
  const CorpusFile& file;
  uint32_t index;
  std::string name;
  hid_t dataset;
  std::vector<hsize_t> dims;
  CorpusCursor& cursor;

  // Progress: the share of the dataset read so far, of the file's size.
  void progress(uint64_t done, uint64_t total) const {
    cursor.consumed = cursor.files_done_bytes + (total ? file.bytes * done / total : file.bytes);
  }
  // Reads rows [row, row + rows) × columns [col, col + cols) (a 1-D dataset: elements [col, col + cols),
  // row 0) as `type` into buf, then calls use(); variable-length data is given back after it.
  void read(hid_t type, hsize_t row, hsize_t rows, hsize_t col, hsize_t cols, void* buf, bool vlen,
            const std::function<void()>& use) const {
    H5Id space(H5Dget_space(dataset), H5Sclose);
    const bool two_d = dims.size() == 2;
    const hsize_t start[2] = {two_d ? row : col, col};
    const hsize_t count[2] = {two_d ? rows : cols, cols};
    const hsize_t n = two_d ? rows * cols : cols;
    H5Id memory(H5Screate_simple(1, &n, nullptr), H5Sclose);
    require(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0 &&
                H5Dread(dataset, type, memory.get(), space.get(), H5P_DEFAULT, buf) >= 0,
            "cannot read dataset " + name + " of " + file.path + " (libhdf5 failed): the file is damaged or "
            "truncated; write it again");
    use();
#if H5_VERSION_GE(1, 12, 0)
    if (vlen) H5Treclaim(type, memory.get(), H5P_DEFAULT, buf);
#else
    if (vlen) H5Dvlen_reclaim(type, memory.get(), H5P_DEFAULT, buf);
#endif
  }
};

// A document per element of a 1-D string dataset.
void read_strings(const Hdf5Source& s, hid_t file_type) {
  const bool vlen = H5Tis_variable_str(file_type) > 0;
  const size_t width = vlen ? 0 : H5Tget_size(file_type);
  const H5T_str_t pad = H5Tget_strpad(file_type);
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_cset(type.get(), H5Tget_cset(file_type));
  H5Tset_size(type.get(), vlen ? H5T_VARIABLE : width);
  if (!vlen) H5Tset_strpad(type.get(), pad);
  const hsize_t n = s.dims[0];
  hsize_t per = vlen ? 64 : std::max<hsize_t>(1, kSlabBytes / std::max<size_t>(width, 1));
  std::vector<char*> strings;
  std::vector<char> fixed;
  for (hsize_t at = 0; at < n;) {
    const hsize_t take = std::min(per, n - at);
    if (vlen) {
      strings.assign(take, nullptr);
      size_t bytes = 0;
      s.read(type.get(), 0, 1, at, take, strings.data(), true, [&] {
        for (char* p : strings) {
          const std::string_view text = p ? std::string_view(p) : std::string_view();
          bytes += text.size();
          add_document_text(s.cursor, s.index, 0, text);
        }
      });
      per = std::clamp<hsize_t>(kSlabBytes / std::max<size_t>(bytes / take, 1), 1, 4096);  // next slab ~ kSlabBytes
    } else {
      fixed.resize(take * width);
      s.read(type.get(), 0, 1, at, take, fixed.data(), false, [&] {
        for (hsize_t i = 0; i < take; ++i) {
          std::string_view text(fixed.data() + i * width, width);
          if (pad == H5T_STR_SPACEPAD) {
            while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
          } else {
            text = text.substr(0, std::min(text.find('\0'), text.size()));
          }
          add_document_text(s.cursor, s.index, 0, text);
        }
      });
    }
    at += take;
    s.progress(at, n);
  }
}

// Ids of one integer dataset, checked against the vocabulary: 1-D one document, 2-D a row each.
class IdReader {
 public:
  IdReader(const Hdf5Source& s, hid_t file_type, const CorpusReadOptions& o)
      : s_(s), o_(o), signed_(H5Tget_sign(file_type) == H5T_SGN_2) {}
  void read_all() {
    const hsize_t rows = s_.dims.size() == 2 ? s_.dims[0] : 1;
    const hsize_t cols = s_.dims.size() == 2 ? s_.dims[1] : s_.dims[0];
    if (cols > kChunkReadyIds || cols == 0) {  // a row at a time, in pieces
      for (hsize_t r = 0; r < rows; ++r) read_long_row(r, cols);
      return;
    }
    const hsize_t per = std::max<hsize_t>(1, kChunkReadyIds / cols);
    for (hsize_t r = 0; r < rows; r += per) {
      const hsize_t take = std::min(per, rows - r);
      read_checked(r, take, 0, cols);
      for (hsize_t i = 0; i < take; ++i) add(std::span(ids_).subspan(i * cols, cols), true, true);
      s_.progress(r + take, rows);
    }
  }

 private:
  void read_long_row(hsize_t r, hsize_t cols) {
    if (cols == 0) return add({}, true, true);
    for (hsize_t c = 0; c < cols; c += kChunkReadyIds) {
      const hsize_t take = std::min<hsize_t>(kChunkReadyIds, cols - c);
      read_checked(r, 1, c, take);
      add(ids_, c == 0, c + take == cols);
      s_.progress(r * cols + c + take, s_.dims.size() == 2 ? s_.dims[0] * cols : cols);
    }
  }
  void read_checked(hsize_t row, hsize_t rows, hsize_t col, hsize_t cols) {
    raw_.resize(rows * cols);
    s_.read(signed_ ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, row, rows, col, cols, raw_.data(), false, [] {});
    ids_.resize(raw_.size());
    for (size_t i = 0; i < raw_.size(); ++i) {
      const uint64_t v = raw_[i];
      if ((signed_ && int64_t(v) < 0) || v >= uint64_t(o_.vocab_size)) bad_id(v, row + i / cols, col + i % cols);
      ids_[i] = uint32_t(v);
    }
  }
  [[noreturn]] void bad_id(uint64_t v, hsize_t row, hsize_t col) const {
    const std::string where = s_.dims.size() == 2 ? "row " + std::to_string(row) + ", column " + std::to_string(col)
                                                  : "element " + std::to_string(col);
    throw Error("input " + s_.file.path + ": dataset " + s_.name + " holds id " +
                (signed_ ? std::to_string(int64_t(v)) : std::to_string(v)) + " at " + where +
                ", outside the vocabulary of " + std::to_string(o_.vocab_size) + " ids of " + o_.tokenizer_path +
                ": give the tokenizer that made these ids");
  }
  void add(std::span<const uint32_t> ids, bool first, bool last) {
    if (first) doc_ = s_.cursor.next_doc++;
    DocPiece p;
    p.doc = doc_;
    p.file = s_.index;
    p.first = first;
    p.last = last;
    s_.cursor.out.add_ids(p, ids);
  }
  const Hdf5Source& s_;
  const CorpusReadOptions& o_;
  const bool signed_;
  std::vector<uint64_t> raw_;
  std::vector<uint32_t> ids_;
  uint64_t doc_ = 0;
};

}  // namespace

void read_hdf5_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& o, CorpusCursor& cursor) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures become one Error line, not HDF5's stack dump
  H5Id f(H5Fopen(file.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  require(f.ok(), "input " + file.path + " is not an HDF5 file that libhdf5 can open (damaged or truncated, or "
                  "not HDF5): write it again, or leave it out");
  require(!o.dataset.empty(), "input " + file.path + " is an HDF5 file: name the dataset to read with --dataset "
                              "(it holds: " + top_level_names(f.get()) + ")");
  const htri_t there = H5Lexists(f.get(), o.dataset.c_str(), H5P_DEFAULT);
  H5Id ds(there > 0 ? H5Dopen2(f.get(), o.dataset.c_str(), H5P_DEFAULT) : -1, H5Dclose);
  require(ds.ok(), "input " + file.path + " has no dataset " + o.dataset + " (it holds: " + top_level_names(f.get()) +
                       "): give one of those with --dataset");
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  Hdf5Source s{file, index, o.dataset, ds.get(), std::vector<hsize_t>(size_t(std::max(rank, 0))), cursor};
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), s.dims.data(), nullptr);
  const H5T_class_t cls = H5Tget_class(type.get());
  const std::string what = "dataset " + o.dataset + " of " + file.path;
  if (cls == H5T_STRING) {
    require(rank == 1, what + " holds strings in " + std::to_string(rank) + " dimensions: give a 1-D string "
                       "dataset (a document per element)");
    return read_strings(s, type.get());
  }
  require(cls == H5T_INTEGER, what + " is of type " + class_name(cls) + ": give a 1-D string dataset (a document "
                              "per element) or an integer dataset of token ids (1-D: one document, 2-D: one per row)");
  require(rank == 1 || rank == 2, what + " holds ids in " + std::to_string(rank) + " dimensions: give a 1-D (one "
                                  "document) or 2-D (a document per row) integer dataset");
  IdReader(s, type.get(), o).read_all();
}

}  // namespace dtrain
