#include "storage/kv_state_machine.h"

#include <mutex>

#include <glog/logging.h>

namespace raftkv {

ApplyResult KvStateMachine::Apply(const Entry& entry) {
  ApplyResult result;
  // Decode outside the lock: readers are only blocked for the map update.
  Command command;
  bool have_command = false;
  if (entry.type() == ENTRY_COMMAND) {
    if (!command.ParseFromString(entry.data())) {
      result.ok = false;
      result.error = "undecodable command at index " + std::to_string(entry.index());
    } else if (command.op() != Command::PUT && command.op() != Command::DELETE &&
               command.op() != Command::CAS) {
      result.ok = false;
      result.error = "unknown command op " + std::to_string(command.op()) + " at index " +
                     std::to_string(entry.index());
    } else {
      have_command = true;
    }
  } else if (entry.type() != ENTRY_NOOP) {
    // An entry type added by a newer version: every replica skips it alike.
    result.ok = false;
    result.error = "unknown entry type " + std::to_string(entry.type()) + " at index " +
                   std::to_string(entry.index());
  }

  std::unique_lock<std::shared_mutex> lock(mu_);
  CHECK_EQ(entry.index(), applied_index_ + 1) << "entries must be applied in index order";
  if (have_command) {
    if (command.op() == Command::PUT) {
      data_.insert_or_assign(command.key(), command.value());
    } else if (command.op() == Command::DELETE) {
      result.existed = data_.erase(command.key()) > 0;
    } else {  // CAS
      auto it = data_.find(command.key());
      result.found = it != data_.end();
      if (result.found) result.current = it->second;
      result.swapped = command.has_expected() ? result.found && it->second == command.expected()
                                              : !result.found;
      if (result.swapped) {
        if (result.found) {
          it->second = command.value();
        } else {
          data_.emplace(command.key(), command.value());
        }
      }
    }
  }
  applied_index_ = entry.index();
  return result;
}

std::optional<std::string> KvStateMachine::Get(const std::string& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

uint64_t KvStateMachine::AppliedIndex() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return applied_index_;
}

size_t KvStateMachine::Size() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return data_.size();
}

}  // namespace raftkv
