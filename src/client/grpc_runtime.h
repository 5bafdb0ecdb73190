// Process-wide settings for the gRPC runtime, applied once at the start of
// every raftkv binary (server, raftkvctl, benchmark).
#pragma once

namespace raftkv {

// Turns off Abseil's mutex deadlock detection. Some distributions (Debian
// among them) build Abseil with it on; gRPC takes Abseil mutexes on every
// call, and the lock-graph bookkeeping cost ~5% of the CPU of both client and
// server in an echo benchmark (perf: absl GraphCycles::GetId/InsertEdge).
void InitGrpcRuntime();

}  // namespace raftkv
