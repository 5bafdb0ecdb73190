// Helpers shared by the service tests.
#pragma once

#include <gtest/gtest.h>

#include "gtest/common/temp_dir.h"
#include "proto/internal.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace raftkv::testing_util {

// For EXPECT_CONTAINS: gmock's HasSubstr without linking gmock.
inline ::testing::AssertionResult ContainsFormat(const char* haystack_expr, const char* needle_expr,
                                                 const std::string& haystack,
                                                 const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << haystack_expr << " (\"" << haystack
                                       << "\") does not contain " << needle_expr << " (\""
                                       << needle << "\")";
}

// A serialized PUT command (the data of a log entry).
inline std::string PutCommand(const std::string& key, const std::string& value) {
  Command cmd;
  cmd.set_op(Command::PUT);
  cmd.set_key(key);
  cmd.set_value(value);
  return cmd.SerializeAsString();
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
