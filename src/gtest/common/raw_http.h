// A blocking HTTP client over plain sockets, for tests of the metrics
// endpoint: it sends exactly the bytes given (garbage included) and reads
// until the server closes, so it sees what a scraper (or an attacker) sees.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace raftkv {
namespace testing_util {

// A connected TCP socket to 127.0.0.1:port (closed by the destructor).
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }

  // Sends all of `bytes`; false on error (e.g. the server closed).
  bool Send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads until the peer closes (true; a reset counts as closed) or
  // `timeout` passes (false). What was read is appended to *out.
  bool ReadUntilClosed(std::string* out, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return true;
      out->append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
};

struct RawResponse {
  bool ok = false;  // a complete response was read and the server closed
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string raw;
};

// Parses "HTTP/1.1 <code> <reason>\r\n<headers>\r\n\r\n<body>".
inline RawResponse ParseRawResponse(const std::string& raw) {
  RawResponse r;
  r.raw = raw;
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  size_t pos = raw.find("\r\n") + 2;
  while (pos < head_end) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers[name] = line.substr(v);
    }
    pos = eol + 2;
  }
  r.body = raw.substr(head_end + 4);
  r.ok = true;
  return r;
}

// Sends `request` on a new connection and reads the response until the
// server closes.
inline RawResponse RawRequest(int port, const std::string& request,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  RawConnection c(port);
  RawResponse r;
  if (!c.connected() || !c.Send(request)) return r;
  std::string raw;
  const bool closed = c.ReadUntilClosed(&raw, timeout);
  r = ParseRawResponse(raw);
  r.ok = r.ok && closed;
  return r;
}

inline RawResponse HttpGet(int port, const std::string& path,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return RawRequest(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
                    timeout);
}

}  // namespace testing_util
}  // namespace raftkv
