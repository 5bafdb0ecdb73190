// The key-value storage engines this build has, by name, for tests run
// over each (TEST_P): "memory" always, "rocksdb" with RAFTKV_HAVE_ROCKSDB.
#pragma once

#include <string>
#include <vector>

namespace raftkv::testing_util {

inline std::vector<std::string> BackendEngines() {
  std::vector<std::string> engines = {"memory"};
#ifdef RAFTKV_HAVE_ROCKSDB
  engines.push_back("rocksdb");
#endif
  return engines;
}

}  // namespace raftkv::testing_util
