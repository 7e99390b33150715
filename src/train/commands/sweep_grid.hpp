// A sweep's grid (`dtrain sweep --grid "train.lr=1e-3,3e-3 model.dim=128,256"`): its text read into
// keys and values, the points of their Cartesian product, and each point's run dir name.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// One key of the grid and the values it takes, in the order given.
struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

// One point of the grid: its run dir name ("lr=1e-3,dim=128") and its key=value pairs, in the grid's
// key order.
struct GridPoint {
  std::string name;
  std::vector<std::pair<std::string, std::string>> values;
};

// "k1=a,b k2=c" (entries separated by white space) read into axes. Error naming the entry and the
// fix for an entry without '=', an empty key, an empty value list or value ("k=", "k=a,,b"), a key
// given twice, or no entry at all. Whether a key exists is the config's to say, not the grid's.
std::vector<GridAxis> parse_grid(const std::string& text);

// The points of the axes' Cartesian product, the first axis varying slowest; each named by its values
// (point_name). Error when two points would share a name (values that differ only in characters
// that a file name cannot hold).
std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes);

// What a key is called in point names and table headers: its last component ("lr" for "train.lr"),
// or the whole key when another axis's key ends in the same component.
std::vector<std::string> axis_labels(const std::vector<GridAxis>& axes);

// "lr=1e-3,dim=128" from labels and values, made safe as one file name: '/', white space and
// control characters become '_', and a leading '.' or '-' is kept off the front by the label.
std::string point_name(const std::vector<std::string>& labels, const std::vector<std::string>& values);

}  // namespace dtrain
