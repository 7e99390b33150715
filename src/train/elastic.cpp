// The trainer's part of an elastic job (see elastic.hpp).
#include "train/elastic.hpp"

#include <cstdlib>

#include "comm/store.hpp"
#include "comm/tcp_store.hpp"
#include "comm/world.hpp"
#include "core/whole_number.hpp"

namespace dtrain {

namespace {

const char* env_text(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

std::optional<Json> membership_record(const World& world, int64_t step) {
  const char* change = env_text("DTRAIN_MEMBERSHIP");
  if (!change) return std::nullopt;
  Json j = Json::object();
  j["type"] = "membership";
  j["step"] = step;
  const char* nodes = env_text("DTRAIN_NODES");
  const auto n = nodes ? parse_whole(nodes, 1, 1 << 20) : std::nullopt;
  j["nodes"] = n ? Json(*n) : Json(nullptr);
  j["world"] = world.size();
  j["change"] = change;
  return j;
}

NewNodesWatch::NewNodesWatch(World& world) : world_(world) {}
NewNodesWatch::~NewNodesWatch() = default;

bool NewNodesWatch::asked() {
  if (!world_.env().elastic) return false;
  double waiting = 0.0;
  if (world_.rank() == 0) {
    Store* store = world_.store();
    if (!store) {
      if (!own_) {
        const DistEnv& e = world_.env();
        own_ = std::make_shared<PrefixStore>(
            std::make_shared<TcpStore>(e.master_addr, e.master_port, e.token, Millis(30000), Millis(30000)),
            e.store_prefix);
      }
      store = own_.get();
    }
    waiting = store->try_get("new_nodes").has_value() ? 1.0 : 0.0;
  }
  if (world_.size() > 1) world_.all().allreduce(&waiting, 1, ReduceOp::max);
  return waiting > 0.0;
}

}  // namespace dtrain
