// Helpers shared by the service tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace raftkv::testing_util {

// A fresh directory under the gtest temp dir, removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "raftkv_service_XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
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

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// For EXPECT_CONTAINS: gmock's HasSubstr without linking gmock.
inline ::testing::AssertionResult ContainsFormat(const char* haystack_expr, const char* needle_expr,
                                                 const std::string& haystack,
                                                 const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << haystack_expr << " (\"" << haystack
                                       << "\") does not contain " << needle_expr << " (\""
                                       << needle << "\")";
}

// Polls `condition` every millisecond until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace raftkv::testing_util

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_PRED_FORMAT2(::raftkv::testing_util::ContainsFormat, haystack, needle)
#define ASSERT_CONTAINS(haystack, needle) \
  ASSERT_PRED_FORMAT2(::raftkv::testing_util::ContainsFormat, haystack, needle)
