// A small result type for storage calls: OK, or an error with a message that
// names what failed (file, offset, reason). Storage never throws across its
// module boundary.
#pragma once

#include <string>
#include <utility>

namespace raftkv {

class Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }

  bool ok() const { return code_ == Code::kOk; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  const std::string& message() const { return message_; }
  std::string ToString() const {
    switch (code_) {
      case Code::kOk: return "OK";
      case Code::kIOError: return "IO error: " + message_;
      case Code::kCorruption: return "Corruption: " + message_;
      case Code::kInvalidArgument: return "Invalid argument: " + message_;
    }
    return message_;
  }

 private:
  enum class Code { kOk, kIOError, kCorruption, kInvalidArgument };
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace raftkv
