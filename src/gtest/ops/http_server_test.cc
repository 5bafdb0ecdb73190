// Tests of HttpServer (ops/http_server.h), the metrics endpoint's HTTP
// server, over real sockets: routing and status codes, malformed and
// oversized requests, silent clients, and shutdown with connections open.
#include "ops/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/common/raw_http.h"
#include "gtest/common/service_test_util.h"

namespace raftkv {
namespace {

using namespace std::chrono_literals;
using testing_util::HttpGet;
using testing_util::RawConnection;
using testing_util::RawRequest;
using testing_util::RawResponse;
using testing_util::WaitFor;

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(options);
    server_->Handle("/metrics", [this](const HttpRequest& r) {
      ++calls_;
      HttpResponse resp;
      resp.content_type = "text/plain; version=0.0.4";
      resp.body = "answer 42\n";
      return resp;
    });
    server_->Handle("/boom", [](const HttpRequest&) -> HttpResponse {
      throw std::runtime_error("handler failed");
    });
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  void ExpectScrapeWorks() {
    RawResponse r = HttpGet(server_->port(), "/metrics", 5s);
    ASSERT_TRUE(r.ok) << r.raw;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "answer 42\n");
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<int> calls_{0};
};

TEST(HttpRequestHeadTest, ParsesAndRefuses) {
  HttpRequest r;
  ASSERT_TRUE(ParseHttpRequestHead("GET /metrics?a=b HTTP/1.1\r\nHost: x\r\n\r\n", &r).ok());
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/metrics?a=b");
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.version, "HTTP/1.1");
  ASSERT_TRUE(ParseHttpRequestHead("GET / HTTP/1.0\r\n\r\n", &r).ok());
  for (const char* bad : {
           "\r\n",                                       // no request line
           "GET /metrics\r\n\r\n",                       // no version
           "GET  /metrics HTTP/1.1\r\n\r\n",             // double space
           "GET /metrics HTTP/1.1 x\r\n\r\n",            // four parts
           "GET metrics HTTP/1.1\r\n\r\n",               // not an absolute path
           "GET /met rics HTTP/1.1\r\n\r\n",             // space in target
           "GET /\x01 HTTP/1.1\r\n\r\n",                 // control in target
           "G(T / HTTP/1.1\r\n\r\n",                     // not a token
           "GET / HTTP/2.0\r\n\r\n",                     // version
           "GET / HTTP/1.1\r\nno colon\r\n\r\n",         // header without ':'
           "GET / HTTP/1.1\r\n: empty name\r\n\r\n",     // empty header name
           "GET / HTTP/1.1\r\n folded: x\r\n\r\n",       // obs-fold / space in name
           "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",         // control in value
           "GET / HTTP/1.1\r\nHost: x\r\n",              // unterminated
       }) {
    EXPECT_EQ(ParseHttpRequestHead(bad, &r).code(), Status::Code::kInvalidArgument) << "accepted: " << bad;
  }
}

TEST_F(HttpServerTest, GetMetricsIs200WithContentTypeAndClose) {
  StartServer();
  RawResponse r = HttpGet(server_->port(), "/metrics");
  ASSERT_TRUE(r.ok) << r.raw;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4");
  EXPECT_EQ(r.headers["content-length"], "10");
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_EQ(r.body, "answer 42\n");
  // A query string does not change the path; HTTP/1.0 is served too.
  r = RawRequest(server_->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(calls_.load(), 2);
}

TEST_F(HttpServerTest, UnknownPathIs404) {
  StartServer();
  for (const char* path : {"/", "/metric", "/metrics/", "/favicon.ico"}) {
    RawResponse r = HttpGet(server_->port(), path);
    ASSERT_TRUE(r.ok) << r.raw;
    EXPECT_EQ(r.status, 404) << path;
  }
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, OtherMethodsAre405) {
  StartServer();
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "BREW"}) {
    RawResponse r = RawRequest(server_->port(), std::string(method) +
                                                    " /metrics HTTP/1.1\r\nHost: x\r\n"
                                                    "Content-Length: 5\r\n\r\nhello");
    ASSERT_TRUE(r.ok) << method << ": " << r.raw;
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.headers["allow"], "GET") << method;
  }
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, HandlerExceptionIs500) {
  StartServer();
  RawResponse r = HttpGet(server_->port(), "/boom");
  ASSERT_TRUE(r.ok) << r.raw;
  EXPECT_EQ(r.status, 500);
  ExpectScrapeWorks();
}

TEST_F(HttpServerTest, MalformedRequestsAre400) {
  StartServer();
  for (const std::string& bad : {std::string("hello\r\n\r\n"), std::string("GET\r\n\r\n"),
                                 std::string("GET /metrics HTTP/9\r\n\r\n"),
                                 std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
                                             15),  // a TLS ClientHello's start
                                 std::string("GET /metrics HTTP/1.1\r\nbad header\r\n\r\n")}) {
    RawResponse r = RawRequest(server_->port(), bad);
    ASSERT_TRUE(r.ok) << r.raw;
    EXPECT_EQ(r.status, 400) << bad;
  }
  // Part of a request, then the client closes its side: 400 as well.
  RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("GET /metr"));
  c.ShutdownWrite();
  std::string raw;
  ASSERT_TRUE(c.ReadUntilClosed(&raw, 5s));
  EXPECT_EQ(testing_util::ParseRawResponse(raw).status, 400) << raw;
  EXPECT_EQ(calls_.load(), 0);
  ExpectScrapeWorks();
}

TEST_F(HttpServerTest, OversizedHeaderIs400) {
  HttpServerOptions options;
  options.max_header_bytes = 8192;
  StartServer(options);
  // A valid request whose headers exceed the limit.
  const std::string big = "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
  RawResponse r = RawRequest(server_->port(), big);
  ASSERT_TRUE(r.ok) << r.raw.substr(0, 200);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("too large"), std::string::npos) << r.body;
  // Endless bytes without a line end: the same, after 8 KiB, not a hang.
  RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  c.Send(std::string(64 * 1024, 'x'));  // may fail half way: the server closed
  std::string raw;
  ASSERT_TRUE(c.ReadUntilClosed(&raw, 5s));
  EXPECT_EQ(testing_util::ParseRawResponse(raw).status, 400) << raw.substr(0, 200);
  // Just under the limit is fine.
  const std::string fits =
      "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n";
  r = RawRequest(server_->port(), fits);
  EXPECT_EQ(r.status, 200) << r.raw.substr(0, 200);
}

TEST_F(HttpServerTest, RandomGarbageNeverBreaksTheServer) {
  HttpServerOptions options;
  options.read_timeout = 100ms;
  StartServer(options);
  std::mt19937 rng(1234);
  for (int i = 0; i < 120; ++i) {
    std::string bytes(rng() % 600, '\0');
    for (char& ch : bytes) ch = static_cast<char>(rng());
    if (i % 2 == 0) bytes += "\r\n\r\n";
    if (i % 7 == 0) bytes = "GET /metrics HTTP/1.1\r\n" + bytes;
    RawConnection c(server_->port());
    ASSERT_TRUE(c.connected()) << "connection " << i;
    c.Send(bytes);
    if (i % 3 == 0) c.ShutdownWrite();
    std::string raw;
    // Every connection ends: with a response or by the read timeout.
    ASSERT_TRUE(c.ReadUntilClosed(&raw, 5s)) << "connection " << i << " never closed";
    if (!raw.empty()) {
      EXPECT_EQ(raw.compare(0, 9, "HTTP/1.1 "), 0) << raw.substr(0, 100);
    }
  }
  ExpectScrapeWorks();
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }, 5s));
}

TEST_F(HttpServerTest, SilentClientDoesNotBlockAScrapeAndIsClosedAtTheTimeout) {
  HttpServerOptions options;
  options.read_timeout = 1500ms;
  StartServer(options);
  // The server's timers start at accept, after this.
  const auto connected_at = std::chrono::steady_clock::now();
  RawConnection silent(server_->port());
  ASSERT_TRUE(silent.connected());
  RawConnection slow(server_->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send("GET /met"));  // and nothing more
  const auto start = std::chrono::steady_clock::now();
  ExpectScrapeWorks();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms) << "the scrape waited for the silent client";
  // Both idle connections are closed by the server once the timeout passes.
  std::string raw;
  EXPECT_TRUE(silent.ReadUntilClosed(&raw, 5s));
  EXPECT_TRUE(raw.empty()) << raw;
  raw.clear();
  EXPECT_TRUE(slow.ReadUntilClosed(&raw, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - connected_at, 1500ms) << "closed before the timeout";
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }, 5s));
}

TEST_F(HttpServerTest, ConnectionsBeyondTheLimitAreRefused) {
  HttpServerOptions options;
  options.max_connections = 2;
  options.read_timeout = 10s;
  StartServer(options);
  RawConnection a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.connected() && b.connected());
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 2; }, 5s));
  RawConnection c(server_->port());  // accepted by the kernel, closed by the server
  std::string raw;
  EXPECT_TRUE(c.ReadUntilClosed(&raw, 5s));
  EXPECT_TRUE(raw.empty());
  // Once one goes away, scrapes are served again.
  ASSERT_TRUE(a.Send("GET /metrics HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(a.ReadUntilClosed(&raw, 5s));
  EXPECT_EQ(testing_util::ParseRawResponse(raw).status, 200);
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 1; }, 5s));
  ExpectScrapeWorks();
}

TEST_F(HttpServerTest, StopWithOpenConnectionsIsPromptAndClosesThem) {
  HttpServerOptions options;
  options.read_timeout = 60s;  // Stop must not wait for it
  StartServer(options);
  RawConnection silent(server_->port());
  RawConnection partial(server_->port());
  ASSERT_TRUE(silent.connected() && partial.connected());
  ASSERT_TRUE(partial.Send("GET /metrics HTTP/1.1\r\nHost"));
  ASSERT_TRUE(WaitFor([&] { return server_->open_connections() == 2; }, 5s));
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(server_->open_connections(), 0u);
  std::string raw;
  EXPECT_TRUE(silent.ReadUntilClosed(&raw, 5s));
  EXPECT_TRUE(partial.ReadUntilClosed(&raw, 5s));
  // Nothing listens any more; a second Stop() is harmless.
  RawConnection late(server_->port());
  EXPECT_FALSE(late.connected());
  server_->Stop();
}

TEST_F(HttpServerTest, PeriodicTasksRunOnTheServerThread) {
  HttpServer server(HttpServerOptions{"127.0.0.1", 0});
  std::atomic<int> runs{0};
  server.Every(20ms, [&] { ++runs; });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return runs.load() >= 3; }, 5s));
  server.Stop();
  const int after_stop = runs.load();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(runs.load(), after_stop);
}

TEST(HttpServerStartTest, BadAddressAndBusyPortAreErrors) {
  HttpServer bad(HttpServerOptions{"not-an-ip", 0});
  Status s = bad.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("not-an-ip"), std::string::npos) << s.ToString();

  HttpServer first(HttpServerOptions{"127.0.0.1", 0});
  ASSERT_TRUE(first.Start().ok());
  HttpServer second(HttpServerOptions{"127.0.0.1", first.port()});
  s = second.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find(std::to_string(first.port())), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace raftkv
