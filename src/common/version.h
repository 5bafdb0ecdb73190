// raftkv's version: CMake's project version and the git commit it was built
// from (cmake/version.cmake writes their definitions at every build).
#pragma once

#include <string>

namespace raftkv {

const char* Version();    // "0.1.0"
const char* GitCommit();  // "3f2c9a1b4d5e", "...-dirty", or "unknown" outside git

// "0.1.0 (git 3f2c9a1b4d5e)"
inline std::string VersionString() { return std::string(Version()) + " (git " + GitCommit() + ")"; }

}  // namespace raftkv
