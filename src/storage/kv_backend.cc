#include "storage/kv_backend.h"

#include <algorithm>

#include "storage/file_util.h"

namespace raftkv {

Status ListCheckpointFiles(const std::string& dir, CheckpointManifest* out) {
  std::vector<std::string> names;
  Status s = file::ListFiles(dir, &names);
  if (!s.ok()) return s;
  std::sort(names.begin(), names.end());
  out->dir = dir;
  out->files.clear();
  for (std::string& name : names) {
    file::File f;
    s = file::File::Open(file::JoinPath(dir, name), file::OpenMode::kReadOnly, &f);
    uint64_t size = 0;
    if (s.ok()) s = f.Size(&size);
    if (!s.ok()) return s;
    out->files.push_back(CheckpointManifest::FileInfo{std::move(name), size});
  }
  return Status::OK();
}

namespace {
Status NoCheckpoints() {
  return Status::FailedPrecondition("this storage engine keeps no checkpoint snapshots");
}
}  // namespace

Status KvBackendFactory::OpenCheckpoint(const std::string&, std::unique_ptr<KvBackend>*) {
  return NoCheckpoints();
}

Status KvBackendFactory::CreateFromCheckpoint(const std::string&, uint64_t, uint64_t,
                                              std::unique_ptr<KvBackend>*) {
  return NoCheckpoints();
}

}  // namespace raftkv
