// Elapsed wall time for logs and metrics.
#pragma once

#include <chrono>

namespace raftkv {

// Milliseconds since `start` on the steady clock.
inline double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace raftkv
