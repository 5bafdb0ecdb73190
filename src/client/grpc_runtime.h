// Process-wide settings for the gRPC runtime, applied once at the start of
// every raftkv binary (server, raftkvctl, benchmark).
#pragma once

#include <chrono>

namespace raftkv {

// Turns off Abseil's mutex deadlock detection. Some distributions (Debian
// among them) build Abseil with it on; gRPC takes Abseil mutexes on every
// call, and the lock-graph bookkeeping cost ~5% of the CPU of both client and
// server in an echo benchmark (perf: absl GraphCycles::GetId/InsertEdge).
void InitGrpcRuntime();

// Waits up to `timeout` for gRPC's own shutdown after the caller destroyed
// every gRPC object. A destroyed channel lives on inside gRPC while its name
// resolution or a connection attempt finishes, and its last reference then
// starts gRPC's clean-up on a gRPC thread. Returning from main() before that
// lets the exit handlers (OpenSSL's among them) run under those threads.
// Returns false if gRPC is still running when the time is up; the caller
// should then leave with std::_Exit() instead of running the exit handlers.
bool WaitForGrpcShutdown(std::chrono::milliseconds timeout);

}  // namespace raftkv
