#include "client/grpc_runtime.h"

#include <absl/synchronization/mutex.h>

namespace raftkv {

void InitGrpcRuntime() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace raftkv
