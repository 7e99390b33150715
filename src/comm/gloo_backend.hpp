// The CPU backend over Gloo (TCP transport): one connected context per process group.
#pragma once
#include <memory>
#include <string>

#include "comm/process_group.hpp"

namespace gloo::transport {
class Device;
}

namespace dtrain {

// The TCP device this process's groups share. `address`: the local IP (or host name) peers
// reach us on; `iface`: an interface name instead (DTRAIN_SOCKET_IFNAME), when not empty.
std::shared_ptr<gloo::transport::Device> make_gloo_device(const std::string& address, const std::string& iface);

// Connects rank `rank` of `size` through `store` (already scoped to this group) and returns
// the backend. Throws naming the group when peers cannot be reached within `timeout`.
std::unique_ptr<Backend> connect_gloo(Store& store, int rank, int size,
                                      const std::shared_ptr<gloo::transport::Device>& device, Millis timeout,
                                      const std::string& group_name);

}  // namespace dtrain
