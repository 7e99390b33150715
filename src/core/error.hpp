// The one error type a user can cause (bad config, missing file, corrupt checkpoint).
// Its message names the problem and the fix; main() prints it on one line and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The process ran out of something it needs (file descriptors, memory, threads): the message names
// the limit. Not a problem of the file or data being read, so nothing that falls back past damaged
// files (checkpoints) may take it for damage.
class ResourceExhausted : public Error {
 public:
  explicit ResourceExhausted(const std::string& what) : Error(what) {}
};

// An error that follows from the configuration and the world's size alone (a bad value, a mesh
// that does not fit, a layout the model cannot take), so every rank of a job finds the same one:
// rank 0 says it, the other ranks stop without repeating it.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what) {}
};

// Runs f; an Error it throws becomes a ConfigError (the caller knows every rank meets the same one).
template <class F>
decltype(auto) same_on_every_rank(F&& f) {
  try {
    return f();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
}

// Throws Error(msg) when cond is false. For conditions a user can cause.
inline void require(bool cond, const std::string& msg) {
  if (!cond) throw Error(msg);
}

}  // namespace dtrain

// Internal invariants (programming errors), kept in release builds.
#define DT_ASSERT(cond)                                                              \
  do {                                                                               \
    if (!(cond))                                                                     \
      throw std::logic_error(std::string("internal error: ") + #cond + " at " +      \
                             __FILE__ + ":" + std::to_string(__LINE__));             \
  } while (0)
