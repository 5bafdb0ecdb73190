// raftkvctl's snapshot commands: snapshot (on the member's own disk),
// snapshot save FILE (a backup) and snapshot restore FILE (offline).

#include "tools/raftkvctl.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/admin_client.h"
#include "ops/backup.h"
#include "node/cluster_config.h"
#include "tools/raftkvctl_etcd.h"
#include "storage/bootstrap_file.h"

namespace raftkv {
namespace ctl {

int CmdSnapshot(raftkv::AdminClient* admin, const std::string& target) {
  raftkv::TakeSnapshotResponse resp;
  grpc::Status s = admin->TakeSnapshot(target, &resp, FLAGS_timeout_ms);
  if (!s.ok()) return RpcError(s);
  if (Json()) {
    Emit(JsonLine(resp));
    return kExitOk;
  }
  std::cout << "OK: snapshot of " << target << " at index " << resp.last_index() << " (term "
            << resp.last_term() << "), " << resp.bytes() << " bytes: " << resp.path() << "\n";
  return kExitOk;
}

// snapshot save FILE: the member's stream goes to FILE.part, which becomes
// FILE only once it matches the announced size and SHA-256 and verifies
// (raftkv::BackupFileWriter).
int CmdSnapshotSave(raftkv::AdminClient* admin, const std::string& target,
                    const std::string& path) {
  std::unique_ptr<raftkv::BackupFileWriter> out;
  if (raftkv::Status s = raftkv::BackupFileWriter::Create(path, &out); !s.ok()) {
    std::cerr << "error: snapshot save: " << s.ToString() << "\n";
    return s.code() == raftkv::Status::Code::kInvalidArgument ? kExitUsage : kExitError;
  }
  bool have_info = false;
  uint64_t member = 0;
  raftkv::ExpectedBackup expected;
  raftkv::Status local;  // a failure on this side, which ends the stream
  grpc::Status s = admin->SnapshotSave(
      target, FLAGS_snapshot_timeout_ms, [&](const raftkv::SnapshotSaveResponse& msg) {
        if (!have_info) {
          if (!msg.has_info()) {
            local = raftkv::Status::Corruption("the first message of the stream has no metadata");
            return false;
          }
          have_info = true;
          member = msg.info().member_id();
          expected.size = msg.info().size();
          expected.last_index = msg.info().last_index();
          expected.last_term = msg.info().last_term();
          expected.revision = msg.info().revision();
        } else if (!expected.sha256.empty()) {
          local = raftkv::Status::Corruption("the stream goes on after its checksum");
          return false;
        }
        if (out->bytes_written() + msg.chunk().size() > expected.size) {
          local = raftkv::Status::Corruption(
              "the member sends more than the " + std::to_string(expected.size) +
              " bytes it announced");
          return false;
        }
        local = out->Append(msg.chunk());
        if (!local.ok()) return false;
        expected.sha256 = msg.sha256();
        return true;
      });
  if (!local.ok()) {
    std::cerr << "error: snapshot save from " << target << ": " << local.ToString() << "\n";
    return kExitError;
  }
  if (!s.ok()) return RpcError(s);
  if (!have_info) {
    std::cerr << "error: snapshot save from " << target << ": the stream was empty\n";
    return kExitError;
  }
  raftkv::SnapshotFileSummary summary;
  if (raftkv::Status bad = out->Finish(expected, &summary); !bad.ok()) {
    std::cerr << "error: snapshot save from " << target << ": " << bad.ToString()
              << " (nothing was written to " << path << ")\n";
    return kExitError;
  }
  if (Json()) {  // what the member announced, once the file checked out against it
    raftkv::SnapshotSaveInfo info;
    info.set_member_id(member);
    info.set_last_index(summary.meta.last_index);
    info.set_last_term(summary.meta.last_term);
    info.set_revision(summary.revision);
    info.set_size(summary.bytes);
    Emit(JsonLine(info));
    return kExitOk;
  }
  std::cout << "Snapshot saved at " << path << " (revision " << summary.revision << ", index "
            << summary.meta.last_index << ", " << summary.bytes << " bytes)\n"
            << "member " << member << ", term " << summary.meta.last_term << ", "
            << summary.keys << " keys, " << summary.leases << " leases, sha256 "
            << expected.sha256 << "\n";
  return kExitOk;
}

// False, saying so on stderr, when `path` (the FILE of `command`) is missing
// or not a regular file.
static bool IsRegularFile(const char* command, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return true;
  std::cerr << "error: " << command << ": " << path
            << (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist")
            << "\n";
  return false;
}

// snapshot restore FILE --data-dir=DIR --id=N --cluster_file=CONF (offline).
int CmdSnapshotRestore(const std::string& path, const CommandOptions& opts) {
  const std::string data_dir = opts.Value("data-dir");
  const std::string id_text = opts.Value("id");
  if (data_dir.empty()) return Usage("snapshot restore needs --data-dir=DIR (the new member's)");
  if (id_text.empty()) return Usage("snapshot restore needs --id=N (the new member's id)");
  if (FLAGS_cluster_file.empty()) {
    return Usage("snapshot restore needs --cluster_file=CONF (the new cluster's members)");
  }
  raftkv::RestoreOptions options;
  options.snapshot_path = path;
  options.data_dir = data_dir;
  if (opts.Has("initial-cluster-token")) {
    options.initial_cluster_token = opts.Value("initial-cluster-token");
  }
  if (!ParseId(id_text, &options.id)) {
    return Usage("--id: member id '" + id_text + "' is not a positive number");
  }
  if (raftkv::Status bad = raftkv::LoadClusterConfig(FLAGS_cluster_file, &options.cluster);
      !bad.ok()) {
    return Usage("--cluster_file: " + bad.message());
  }
  if (!IsRegularFile("snapshot restore", path)) return kExitUsage;
  raftkv::RestoreResult result;
  raftkv::Status s = raftkv::RestoreDataDir(options, &result);
  if (!s.ok()) {
    std::cerr << "error: snapshot restore: " << s.ToString() << "\n";
    // Refusals of the input (a directory with data, a damaged file, an id
    // not in the cluster) are usage errors; an I/O failure is not.
    const bool refused = s.code() == raftkv::Status::Code::kInvalidArgument ||
                         s.code() == raftkv::Status::Code::kCorruption;
    return refused ? kExitUsage : kExitError;
  }
  std::string members;
  for (const auto& m : result.config.members()) {
    members += (members.empty() ? "" : ", ") + std::to_string(m.id()) + "=" + m.address();
  }
  if (result.from_etcd) {
    const raftkv::EtcdImportSummary& e = result.etcd;
    std::cout << "Imported etcd database " << path << ": revision " << e.revision
              << ", compacted at " << e.compact_revision << ", " << e.keys << " keys, "
              << e.leases << " leases, " << e.revisions << " revisions held, history from "
              << e.history_from << (e.leaseless ? ", " + std::to_string(e.leaseless) +
                                                      " keys without their lease" : "")
              << "\n";
  }
  std::cout << "Restored " << path << " (revision " << result.source.revision << ", index "
            << result.source.meta.last_index << ", term " << result.source.meta.last_term << ", "
            << result.source.keys << " keys, " << result.source.leases << " leases) into "
            << data_dir << " as member " << options.id << " of the new cluster " << members
            << " (cluster id " << raftkv::ClusterIdHex(result.cluster_id) << ")\n"
            << "start it with: raftkv-server --id=" << options.id
            << " --cluster_file=" << FLAGS_cluster_file << " --data_dir=" << data_dir << "\n";
  return kExitOk;
}

// The SHA-256 of the file at `path` (as snapshot save prints it).
static raftkv::Status FileSha256(const std::string& path, std::string* hex) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return raftkv::Status::IOError("cannot open " + path);
  raftkv::Sha256 sha;
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(&buffer[0], static_cast<std::streamsize>(buffer.size()));
    sha.Update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) return raftkv::Status::IOError("cannot read " + path);
  *hex = sha.HexDigest();
  return raftkv::Status::OK();
}

// snapshot status FILE: etcdctl's columns (HASH is the file's SHA-256,
// TOTAL SIZE its size), then raftkv's index, term and leases; only once the
// whole file verifies.
int CmdSnapshotStatus(const std::string& path) {
  if (!IsRegularFile("snapshot status", path)) return kExitUsage;
  raftkv::SnapshotFileSummary summary;
  std::string sha256;
  raftkv::Status s = raftkv::VerifySnapshotFile(path, &summary);
  if (s.ok()) s = FileSha256(path, &sha256);
  if (!s.ok()) {
    std::cerr << "error: snapshot status: " << s.ToString() << "\n";
    // A damaged file is a refusal of the input, as for snapshot restore.
    return s.code() == raftkv::Status::Code::kCorruption ? kExitUsage : kExitError;
  }
  const std::string revision = std::to_string(summary.revision);
  const std::string keys = std::to_string(summary.keys);
  const std::string index = std::to_string(summary.meta.last_index);
  const std::string term = std::to_string(summary.meta.last_term);
  const std::string leases = std::to_string(summary.leases);
  if (Json()) {
    std::cout << "{\"hash\":\"" << sha256 << "\",\"revision\":" << revision
              << ",\"totalKey\":" << keys << ",\"totalSize\":" << summary.bytes
              << ",\"index\":" << index << ",\"term\":" << term << ",\"leases\":" << leases
              << "}\n";
  } else if (Table()) {
    PrintRows({{"HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE", "INDEX", "TERM", "LEASES"},
               {sha256, revision, keys, HumanBytes(summary.bytes), index, term, leases}});
  } else {
    std::cout << sha256 << ", " << revision << ", " << keys << ", " << HumanBytes(summary.bytes)
              << ", " << index << ", " << term << ", " << leases << "\n";
  }
  return kExitOk;
}

}  // namespace ctl
}  // namespace raftkv
