// A store for the state machine's tests: the memory engine behind a
// persistent() front.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "storage/kv_backend.h"
#include "storage/memory_backend.h"

namespace raftkv {
namespace testing_kv {

// The memory engine behind a persistent() front: the store outlives the
// state machine, and every write is kept, as if flushed.
class KeptMemoryStore : public KvBackend {
 public:
  explicit KeptMemoryStore(std::shared_ptr<MemoryBackend> mem) : mem_(std::move(mem)) {}
  Status Write(const BackendBatch& batch) override { return mem_->Write(batch); }
  std::shared_ptr<const BackendView> View() const override { return mem_->View(); }
  Status Flush() override { return Status::OK(); }
  bool persistent() const override { return true; }
  Status Checkpoint(const std::string& dir, CheckpointManifest* out) override {
    return mem_->Checkpoint(dir, out);
  }
  BackendStats Stats() const override { return mem_->Stats(); }
  Status BackgroundError() const override { return Status::OK(); }

 private:
  const std::shared_ptr<MemoryBackend> mem_;
};

}  // namespace testing_kv
}  // namespace raftkv
