// The replicated state machine: an ordered in-memory map from key to value,
// changed only by applying committed log entries in index order. Rebuilt from
// the log on restart (snapshots will make that bounded).
//
// Thread safety: Apply() is called by one thread (the node's apply loop);
// Get()/Size()/AppliedIndex() may be called concurrently from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

#include "raftkv.pb.h"

namespace raftkv {

struct ApplyResult {
  bool ok = true;            // false if the entry's command could not be decoded
  bool existed = false;      // DELETE: whether the key was present
  bool swapped = false;      // CAS: whether the new value was written
  // CAS: the key's state just before the operation (found: present; current:
  // its value then, empty when absent).
  bool found = false;
  std::string current;
  std::string error;         // set when !ok
};

class KvStateMachine {
 public:
  // Applies one committed entry. entry.index must be AppliedIndex() + 1 (it
  // is a programming error otherwise: CHECK). NOOP entries only advance the
  // applied index. A COMMAND whose data does not parse is applied as a no-op
  // with ok = false (every replica does the same, so they stay identical).
  // A CAS writes its value iff (has_expected ? the key is present and equal to
  // expected : the key is absent); the decision depends only on the map, so
  // every replica decides alike.
  ApplyResult Apply(const Entry& entry);

  std::optional<std::string> Get(const std::string& key) const;
  uint64_t AppliedIndex() const;
  size_t Size() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::string> data_;  // guarded by mu_
  uint64_t applied_index_ = 0;               // guarded by mu_
};

}  // namespace raftkv
