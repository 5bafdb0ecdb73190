// HttpServer: a minimal HTTP/1.1 server for the metrics endpoint (Boost.Asio,
// header-only; prometheus-cpp is not packaged by Debian). One thread, all
// I/O asynchronous, one request per connection:
//
//   - the request line and headers must arrive within `read_timeout` and
//     fit in `max_header_bytes`; otherwise 400 (too large, malformed) or the
//     connection is closed (silent or slow client);
//   - GET <path> of a registered path -> its handler's response; an unknown
//     path -> 404; any other method -> 405 (with Allow: GET);
//   - every response carries Connection: close; the server then shuts down
//     its sending side and discards what the client still sends (at most
//     about a second) before closing, so the client reads the whole
//     response rather than a reset;
//   - at most `max_connections` at once: more are closed at accept.
// A request body is never read. Stop() closes every connection at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace raftkv {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent, e.g. "/metrics?x=1"
  std::string path;    // target without the query, e.g. "/metrics"
  std::string version;  // "HTTP/1.0" or "HTTP/1.1"
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  std::string address = "0.0.0.0";  // IPv4 or IPv6 literal
  int port = 0;                     // 0: a free port chosen by the kernel (tests)
  size_t max_header_bytes = 8192;   // request line + headers + the blank line
  std::chrono::milliseconds read_timeout{5000};
  size_t max_connections = 64;
};

// The request line and headers of `head` (everything up to and including
// the blank line); InvalidArgument if malformed. Exposed for tests.
Status ParseHttpRequestHead(const std::string& head, HttpRequest* request);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Start(): serve GET `path` with `handler` (run on the server's
  // thread; an exception becomes a 500).
  void Handle(const std::string& path, Handler handler);
  // Before Start(): run `task` on the server's thread every `interval`,
  // starting one interval after Start().
  void Every(std::chrono::milliseconds interval, std::function<void()> task);

  // Binds, listens and starts the thread. An error names the address.
  Status Start();
  // Closes the listener and every connection and joins the thread.
  // Idempotent; the handlers are not called after it returns.
  void Stop();

  // The bound port (after Start()).
  int port() const { return port_; }
  // Connections open right now (tests).
  size_t open_connections() const { return open_connections_.load(); }

 private:
  class Connection;
  struct Impl;
  void Accept();
  HttpResponse Dispatch(const HttpRequest& request);

  const HttpServerOptions options_;
  std::map<std::string, Handler> handlers_;
  std::vector<std::pair<std::chrono::milliseconds, std::function<void()>>> tasks_;
  std::atomic<size_t> open_connections_{0};
  int port_ = 0;
  std::unique_ptr<Impl> impl_;  // the io_context, acceptor and timers
  std::thread thread_;
};

}  // namespace raftkv
