#include "fuzz/fuzz_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gflags/gflags.h>
#include <glog/logging.h>

namespace raftkv::fuzz {
namespace {

std::string* scratch = nullptr;

void RemoveScratch() {
  if (scratch == nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(*scratch, ec);
}

}  // namespace

const std::string& FreshDir() {
  if (scratch == nullptr) {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : nullptr;
    if (base == nullptr) base = std::getenv("TMPDIR");
    if (base == nullptr) base = "/tmp";
    std::string templ = std::string(base) + "/raftkv-fuzz-XXXXXX";
    FUZZ_ASSERT(mkdtemp(templ.data()) != nullptr, "mkdtemp %s failed", templ.c_str());
    scratch = new std::string(templ + "/d");
    std::atexit([] {
      RemoveScratch();
      std::error_code ec;
      std::filesystem::remove(std::filesystem::path(*scratch).parent_path(), ec);
    });
  }
  RemoveScratch();
  std::filesystem::create_directory(*scratch);
  return *scratch;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  FUZZ_ASSERT(out.good(), "cannot write %s", path.c_str());
}

}  // namespace raftkv::fuzz

// Quiet logging: only FATAL (a CHECK failure) is printed, and it still aborts.
// RAFTKV_FUZZ_LOG=1 in the environment prints everything (to debug a crash).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = std::getenv("RAFTKV_FUZZ_LOG") != nullptr ? 0 : 3;
  return 0;
}
