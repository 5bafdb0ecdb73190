// The options the server opens its RocksDB stores with (node/recovery.cc),
// for the tests that run the state machine on RocksDB.
#pragma once

#ifdef RAFTKV_HAVE_ROCKSDB
#include "kv/mvcc_keys.h"
#include "storage/rocksdb_backend.h"

namespace raftkv {
namespace testing_kv {

inline RocksDbBackend::Options StoreOptions(bool flush_on_close = true) {
  RocksDbBackend::Options options;
  options.flush_on_close = flush_on_close;
  options.insert_group_prefix = mvcc::InsertGroupPrefix;
  options.lookup_prefix = mvcc::LookupPrefix;
  return options;
}

}  // namespace testing_kv
}  // namespace raftkv
#endif  // RAFTKV_HAVE_ROCKSDB
