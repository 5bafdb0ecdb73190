// Test helpers shared by every test binary: a self-removing temporary
// directory and whole-file read/write.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace raftkv::testing_util {

// A fresh directory under the gtest temp dir, named raftkv_<tag>_XXXXXX and
// removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    std::string pattern = ::testing::TempDir() + "raftkv_" + tag + "_XXXXXX";
#ifdef _WIN32
    // No mkdtemp: create_directory is the atomic "made it, not there before".
    std::random_device rd;
    bool made = false;
    for (int attempt = 0; attempt < 100 && !made; ++attempt) {
      path_ = pattern.substr(0, pattern.size() - 6) + std::to_string(rd() % 1000000);
      std::error_code ec;
      made = std::filesystem::create_directory(path_, ec);
    }
    EXPECT_TRUE(made) << "cannot create a directory like " << pattern;
#else
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
#endif
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace raftkv::testing_util
