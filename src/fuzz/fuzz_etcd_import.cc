// Fuzz target: importing an etcd database (kv/etcd_import.h over
// storage/bbolt_reader.h) from arbitrary bytes.
//
// Input: the database's bytes (the seed is the database of
// src/gtest/ops/testdata/etcd-3.4.snapshot.db without its SHA-256). The
// import must return OK or Status::Corruption (never crash, never allocate
// beyond what the input holds); an image it builds must restore into a state
// machine (Restore checks every record) with the revision, keys and leases
// the import reported.
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kv/etcd_import.h"
#include "kv/kv_state_machine.h"
#include "storage/bbolt_reader.h"
#include "storage/snapshot_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  const std::string input(reinterpret_cast<const char*>(data), size);
  BboltReader::LooksLikeBbolt(input);
  std::unique_ptr<BboltReader> db;
  Status s = BboltReader::OpenMemory("input", input, &db);
  SnapshotWriter writer;
  EtcdImportSummary summary;
  if (s.ok()) s = ImportEtcdDatabase(db.get(), &writer, &summary, 4);
  if (!s.ok()) {
    FUZZ_ASSERT(s.IsCorruption(), "not a corruption: %s", s.ToString().c_str());
    return 0;
  }
  const std::string path = FreshDir() + "/image.snap";
  WriteFile(path, EncodeSnapshotFile(writer));
  std::unique_ptr<SnapshotReader> reader;
  s = SnapshotReader::Open(path, &reader);
  KvStateMachine sm;
  if (s.ok()) s = sm.Restore(reader.get());
  FUZZ_ASSERT(s.ok(), "the imported image does not restore: %s", s.ToString().c_str());
  FUZZ_ASSERT(sm.Revision() == summary.revision && sm.Size() == summary.keys &&
                  sm.Leases().size() == summary.leases,
              "restored revision %lld, %zu keys, %zu leases; imported %lld, %llu, %llu",
              static_cast<long long>(sm.Revision()), sm.Size(), sm.Leases().size(),
              static_cast<long long>(summary.revision),
              static_cast<unsigned long long>(summary.keys),
              static_cast<unsigned long long>(summary.leases));
  return 0;
}
