// The Windows smoke program of scripts/cross_check.sh: the storage file layer
// (src/storage/file_util), the hard state file, crc32c and the version strings, built with
// MinGW-w64 and run under Wine. Usage: cross_smoke <scratch directory>.
// Prints one line per check; exits 0 only if all pass.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/version.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"
#include "storage/hard_state_file.h"

namespace file = raftkv::file;

namespace {

int checks = 0;
int failures = 0;

void Check(bool ok, const std::string& what, const std::string& detail = "") {
  ++checks;
  if (!ok) ++failures;
  std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
}

void CheckStatus(const raftkv::Status& s, const std::string& what) {
  Check(s.ok(), what, s.ok() ? "" : s.ToString());
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <scratch directory>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string dir = file::JoinPath(file::JoinPath(root, "data"), "member");
  Check(file::DirName(file::JoinPath(dir, "x")) == dir, "JoinPath/DirName");

  bool created = false;
  CheckStatus(file::CreateDirs(dir, &created), "CreateDirs");
  Check(created, "CreateDirs reports the new directory");
  CheckStatus(file::CreateDirsDurably(file::JoinPath(dir, "snap")), "CreateDirsDurably");
  created = true;
  CheckStatus(file::CreateDirs(dir, &created), "CreateDirs of an existing directory");
  Check(!created, "CreateDirs reports nothing new");

  // The old file, to be replaced atomically.
  const std::string target = file::JoinPath(dir, "state");
  const std::string tmp = target + ".tmp";
  {
    file::File f;
    CheckStatus(file::File::Open(target, file::OpenMode::kCreateTruncate, &f), "create the old file");
    CheckStatus(f.WriteAt("old contents", 12, 0), "write the old file");
    CheckStatus(f.Sync(), "Sync");
    CheckStatus(f.Close(), "Close");
  }
  // The new one: a write, a hole, another write.
  {
    file::File f;
    CheckStatus(file::File::Open(tmp, file::OpenMode::kCreateTruncate, &f), "create the new file");
    CheckStatus(f.WriteAt("hello", 5, 0), "WriteAt 0");
    CheckStatus(f.WriteAt("world", 5, 10), "WriteAt 10 (after a hole)");
    uint64_t size = 0;
    CheckStatus(f.Size(&size), "Size");
    Check(size == 15, "size is 15", std::to_string(size));
    CheckStatus(f.DataSync(), "DataSync");
    CheckStatus(f.Close(), "Close");
  }
  CheckStatus(file::Rename(tmp, target), "Rename over the old file");
  CheckStatus(file::SyncDir(dir), "SyncDir");

  std::vector<std::string> names;
  CheckStatus(file::ListFiles(dir, &names), "ListFiles");
  Check(Contains(names, "state") && !Contains(names, "state.tmp"), "ListFiles after the rename",
        std::to_string(names.size()) + " names");

  {
    file::File f;
    CheckStatus(file::File::Open(target, file::OpenMode::kReadOnly, &f), "open for reading");
    std::string contents;
    CheckStatus(f.ReadAll(&contents), "ReadAll");
    Check(contents == std::string("hello\0\0\0\0\0world", 15), "read back the new contents",
          contents.substr(0, 5));
    std::string part;
    CheckStatus(f.ReadAt(12, 10, &part), "ReadAt across the end");
    Check(part == "rld", "ReadAt across the end returns the tail", part);
    CheckStatus(f.ReadAt(100, 4, &part), "ReadAt past the end");
    Check(part.empty(), "ReadAt past the end returns nothing");
  }
  {
    file::File f;
    CheckStatus(file::File::Open(target, file::OpenMode::kReadWrite, &f), "open for writing");
    CheckStatus(f.Truncate(5), "Truncate");
    uint64_t size = 0;
    CheckStatus(f.Size(&size), "Size after Truncate");
    Check(size == 5, "size is 5", std::to_string(size));
  }

  bool not_found = false;
  {
    file::File f;
    CheckStatus(file::File::Open(file::JoinPath(dir, "missing"), file::OpenMode::kReadOnly, &f,
                                 &not_found),
                "open a missing file");
    Check(not_found && !f.is_open(), "a missing file is reported as not found");
  }

  // The data directory's lock: exclusive even within one process.
  const std::string lock_path = file::JoinPath(dir, "LOCK");
  {
    file::FileLock first;
    bool held = true;
    CheckStatus(file::FileLock::Acquire(lock_path, &first, &held), "take the lock");
    Check(first.locked() && !held, "the first holder has the lock");
    file::FileLock second;
    held = false;
    CheckStatus(file::FileLock::Acquire(lock_path, &second, &held), "try the lock again");
    Check(held && !second.locked(), "the second attempt is refused");
    first.Unlock();
    held = true;
    CheckStatus(file::FileLock::Acquire(lock_path, &second, &held), "take the lock after Unlock");
    Check(second.locked() && !held, "the lock is free after Unlock");
  }

  CheckStatus(file::Remove(target), "Remove");
  not_found = false;
  {
    file::File f;
    CheckStatus(file::File::Open(target, file::OpenMode::kReadOnly, &f, &not_found),
                "open the removed file");
    Check(not_found, "the removed file is gone");
  }

  // The hard state: written to a temporary file, synced, renamed over the
  // old one; a new HardStateFile object reads what the last Save wrote.
  {
    const std::string path = file::JoinPath(dir, "hardstate");
    raftkv::HardStateFile hs(path);
    raftkv::HardState state;
    state.term = 7;
    state.vote = 3;
    CheckStatus(hs.Save(state), "HardStateFile::Save");
    state.term = 8;
    state.vote = 2;
    CheckStatus(hs.Save(state), "HardStateFile::Save over the first");
    raftkv::HardStateFile again(path);
    raftkv::HardState loaded;
    CheckStatus(again.Load(&loaded), "HardStateFile::Load");
    Check(loaded == state, "the hard state reads back",
          std::to_string(loaded.term) + "/" + std::to_string(loaded.vote));
  }

  // CRC-32C's check value, by the table-driven code and by whatever the
  // build selected.
  const char* digits = "123456789";
  Check(raftkv::crc32c::Value(digits, 9) == 0xE3069283u, "crc32c check value");
  Check(raftkv::crc32c::ExtendPortable(0, digits, 9) == 0xE3069283u, "crc32c portable check value");
  Check(std::strlen(raftkv::Version()) > 0 && std::strlen(raftkv::GitCommit()) > 0, "version",
        raftkv::VersionString());

  std::printf("smoke: %d of %d checks passed\n", checks - failures, checks);
  return failures == 0 ? 0 : 1;
}
