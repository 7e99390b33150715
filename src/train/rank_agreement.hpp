// Every rank of a job trains the same configuration on the same data. Checked before the first step:
// a node started with another lr, seed or model would otherwise train without a word, its replica
// drifting from the others, and the sharded checkpoint would mix them.
#pragma once
#include <functional>
#include <string>

#include "comm/world.hpp"
#include "core/json.hpp"

namespace dtrain {

// The keys a rank may set for itself: where its copy of the data lies (its content is compared
// through the data's fingerprint), its threads, its progress bar.
bool rank_may_differ(const std::string& key);

// The keys where two resolved run configs differ, as "train.lr (0.001 there, 0.003 here), …" (the
// first few), leaving out rank_may_differ's keys and those `skip` names; "" when none differ.
std::string config_differences(const Json& here, const Json& there, const std::function<bool(const std::string&)>& skip);

// Compares a digest of `config` (the resolved run config, less the keys above) and of the data's
// fingerprint across every rank of `world` (collective). On a mismatch, every rank throws the same
// ConfigError: the ranks (and hosts) that differ from rank 0 and the first keys that differ, with
// both values.
void require_same_run_on_every_rank(World& world, const Json& config, const std::string& data_fingerprint);

}  // namespace dtrain
