#include "bench/floor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace raftkv {
namespace bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Micros(SteadyClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

}  // namespace

double MedianFsyncMicros(const std::string& dir, int samples, size_t bytes, std::string* error) {
  std::string path = dir + "/raftkv-bench-fsync-XXXXXX";
  const int fd = ::mkstemp(&path[0]);
  if (fd < 0) {
    *error = "cannot create a file in " + dir + ": " + std::strerror(errno);
    return -1;
  }
  const std::string record(bytes, 'f');
  std::vector<double> micros;
#if defined(__linux__)
  // The log's segments are preallocated (storage/log_store.h), so that an
  // append changes no inode: the floor's append is made the same way, or it
  // would charge every write an inode update the log does not make.
  (void)::fallocate(fd, 0, 0, static_cast<off_t>(bytes) * samples);
#endif
  for (int i = 0; i < samples; ++i) {
    const SteadyClock::time_point start = SteadyClock::now();
    const off_t offset = static_cast<off_t>(bytes) * i;
    if (::pwrite(fd, record.data(), record.size(), offset) != static_cast<ssize_t>(record.size()) ||
        ::fdatasync(fd) != 0) {
      *error = "cannot append to " + path + ": " + std::strerror(errno);
      break;
    }
    micros.push_back(Micros(SteadyClock::now() - start));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return error->empty() ? Median(micros) : -1;
}

double MedianEchoMicros(const Connections& conns, int samples, size_t payload_bytes, int timeout_ms,
                        std::string* error) {
  EchoRequest req;
  req.set_payload(std::string(payload_bytes, 'e'));
  std::vector<double> micros;
  constexpr int kWarmup = 20;
  for (int i = 0; i < kWarmup + samples; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    EchoResponse resp;
    const SteadyClock::time_point start = SteadyClock::now();
    grpc::Status s = conns.stub(0)->Echo(&ctx, req, &resp);
    const double took = Micros(SteadyClock::now() - start);
    if (!s.ok() || resp.payload() != req.payload()) {
      *error = "Echo to " + conns.target() + " failed: " +
               (s.ok() ? std::string("wrong payload") : s.error_message());
      return -1;
    }
    if (i >= kWarmup) micros.push_back(took);
  }
  return Median(micros);
}

void ComputeFloorRatio(Floor* floor) {
  floor->ratio = -1;
  if (floor->write_p50_us <= 0 || floor->echo_rtt_p50_us <= 0 || floor->fsync_p50_us <= 0) return;
  floor->ratio = floor->write_p50_us / (2 * floor->echo_rtt_p50_us + floor->fsync_p50_us);
}

}  // namespace bench
}  // namespace raftkv
