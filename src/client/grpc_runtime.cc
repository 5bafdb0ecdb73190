#include "client/grpc_runtime.h"

#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>

#include <thread>

namespace raftkv {

void InitGrpcRuntime() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

bool WaitForGrpcShutdown(std::chrono::milliseconds timeout) {
  // grpc_is_initialized() reads gRPC's count of users under the lock that its
  // clean-up holds from start to end, so "false" means the clean-up (which
  // joins gRPC's threads) has finished.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (grpc_is_initialized()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace raftkv
