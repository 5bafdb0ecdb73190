// RocksDbStoreDir: where the RocksDB engine keeps its stores in a data
// directory. `<data_dir>/KV_CURRENT` names the store a restart opens
// (`kv-<index>-<term>`, the state a snapshot install created it for; kv-0-0
// for a store that started empty); it is replaced durably (write, fsync,
// rename, fsync of the directory), which makes it an install's commit point.
// Any other kv-* directory is a store a crash left half-built or an install
// replaced: removed at Open(), and by RemoveStale() once closed.
//
// Thread safety: Create/Commit run on the thread that installs (one at a
// time); RemoveStale may run on any thread.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "storage/kv_backend.h"
#include "storage/rocksdb_backend.h"

namespace raftkv {

class RocksDbStoreDir final : public KvBackendFactory {
 public:
  // Opens the store KV_CURRENT names in `data_dir` into *current, creating
  // an empty one (and KV_CURRENT) when there is none, and removes the other
  // kv-* directories. Corruption, naming the file, when KV_CURRENT names no
  // store.
  // `options` are those every store of the directory is opened with.
  static Status Open(const std::string& data_dir, std::unique_ptr<RocksDbStoreDir>* dir,
                     std::unique_ptr<KvBackend>* current,
                     const RocksDbBackend::Options& options = RocksDbBackend::Options());

  Status Create(uint64_t index, uint64_t term, std::unique_ptr<KvBackend>* out) override;
  Status Commit(uint64_t index, uint64_t term) override;
  void RemoveStale() override;
  Status OpenCheckpoint(const std::string& dir, std::unique_ptr<KvBackend>* out) override;
  // SST files are linked; the others (CURRENT, MANIFEST-*, OPTIONS-*),
  // which RocksDB may write again, are copied.
  Status CreateFromCheckpoint(const std::string& dir, uint64_t index, uint64_t term,
                              std::unique_ptr<KvBackend>* out) override;

  // The store a restart opens, e.g. "kv-0-0".
  std::string current() const;
  static std::string StoreName(uint64_t index, uint64_t term);

 private:
  RocksDbStoreDir(std::string data_dir, const RocksDbBackend::Options& options)
      : data_dir_(std::move(data_dir)), options_(options) {}
  Status OpenStore(const std::string& name, std::unique_ptr<KvBackend>* out);
  // Reserves the name of a store being created (Create, CreateFromCheckpoint).
  Status BeginCreate(const std::string& name, uint64_t index, uint64_t term);
  // Creates the store (index, term): its directory emptied, `fill`ed, then
  // opened.
  Status CreateWith(uint64_t index, uint64_t term, const std::function<Status(const std::string& path)>& fill,
                    std::unique_ptr<KvBackend>* out);

  const std::string data_dir_;
  const RocksDbBackend::Options options_;
  mutable Mutex mu_;
  std::string current_ GUARDED_BY(mu_);
  // The stores opened by this process, by name: a replaced one is removed
  // once closed.
  std::map<std::string, std::weak_ptr<const void>> opened_ GUARDED_BY(mu_);
  // Being created by Create() (RemoveStale, on another thread, leaves them).
  std::set<std::string> creating_ GUARDED_BY(mu_);
};

}  // namespace raftkv
