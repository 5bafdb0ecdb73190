#include "ops/http_server.h"

#include <glog/logging.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <exception>

namespace raftkv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// How long a connection may take to drain after its response (see the
// header: lingering close).
constexpr std::chrono::milliseconds kLinger{1000};

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

// RFC 9110 token characters (method and header names).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Visible ASCII only: no controls, spaces or bytes >= 0x80 in a target.
bool IsTarget(const std::string& s) {
  if (s.empty() || s[0] != '/') return false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

std::string Serialize(const HttpResponse& r, bool allow_get) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + ReasonPhrase(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (allow_get) out += "Allow: GET\r\n";
  out += "Connection: close\r\n\r\n";
  out += r.body;
  return out;
}

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

Status ParseHttpRequestHead(const std::string& head, HttpRequest* request) {
  // Lines end with CRLF; the head ends with an empty line.
  std::vector<std::string> lines;
  size_t pos = 0;
  for (;;) {
    const size_t eol = head.find("\r\n", pos);
    if (eol == std::string::npos) {
      return Status::InvalidArgument("request head not terminated by an empty line");
    }
    if (eol == pos) break;  // the blank line
    lines.push_back(head.substr(pos, eol - pos));
    pos = eol + 2;
  }
  if (lines.empty()) {
    return Status::InvalidArgument("empty request");
  }
  // Request line: METHOD SP TARGET SP VERSION, single spaces.
  const std::string& line = lines[0];
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) {
    return Status::InvalidArgument("malformed request line");
  }
  request->method = line.substr(0, sp1);
  request->target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  request->version = line.substr(sp2 + 1);
  if (!IsToken(request->method)) {
    return Status::InvalidArgument("malformed method");
  }
  if (!IsTarget(request->target)) {
    return Status::InvalidArgument("malformed request target (an absolute path is expected)");
  }
  if (request->version != "HTTP/1.1" && request->version != "HTTP/1.0") {
    return Status::InvalidArgument("unsupported HTTP version");
  }
  request->path = request->target.substr(0, request->target.find('?'));
  // Headers: NAME ":" VALUE; obsolete line folding and controls are refused.
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& h = lines[i];
    const size_t colon = h.find(':');
    if (colon == std::string::npos || !IsToken(h.substr(0, colon))) {
      return Status::InvalidArgument("malformed header line");
    }
    for (size_t j = colon + 1; j < h.size(); ++j) {
      const unsigned char u = static_cast<unsigned char>(h[j]);
      if ((u < 0x20 && u != '\t') || u == 0x7f) {
        return Status::InvalidArgument("control character in a header value");
      }
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------

namespace {

// A task run every `interval` on the server's thread, rescheduled from its
// previous expiry (no drift).
struct Periodic {
  Periodic(asio::io_context& io, std::chrono::milliseconds interval, std::function<void()>* task)
      : timer(io), interval(interval), task(task) {}
  void Arm() {
    timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled by Stop()
      (*task)();
      // After a stall (a stopped process, an overloaded machine) skip the
      // missed runs rather than catching up in a burst.
      const auto next = timer.expiry() + interval;
      const auto now = asio::steady_timer::clock_type::now();
      timer.expires_at(next > now ? next : now + interval);
      Arm();
    });
  }
  asio::steady_timer timer;
  const std::chrono::milliseconds interval;
  std::function<void()>* const task;
};

}  // namespace

struct HttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<std::unique_ptr<Periodic>> tasks;
  // Open connections, so that Stop() can close them (server thread only).
  std::vector<std::weak_ptr<Connection>> connections;
  bool stopped = false;  // server thread only
};

// One accepted connection; owned by the handlers of its pending operations
// (shared_from_this), so it lives exactly as long as something waits on it.
class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer* server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        deadline_(server->impl_->io),
        buffer_(server->options_.max_header_bytes) {
    server_->open_connections_.fetch_add(1);
  }
  ~Connection() { server_->open_connections_.fetch_sub(1); }

  void Start() {
    auto self = shared_from_this();
    deadline_.expires_after(server_->options_.read_timeout);
    deadline_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->Close();  // timed out: a silent or slow client
    });
    asio::async_read_until(socket_, buffer_, "\r\n\r\n",
                           [self](const boost::system::error_code& ec, size_t n) {
                             self->OnHead(ec, n);
                           });
  }

  void Close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
    deadline_.cancel();
  }

 private:
  void OnHead(const boost::system::error_code& ec, size_t n) {
    if (ec == asio::error::not_found) {  // the buffer filled without a blank line
      Respond(TextResponse(400, "request header too large (limit " +
                                    std::to_string(server_->options_.max_header_bytes) +
                                    " bytes)\n"),
              false);
      return;
    }
    if (ec) {
      // Closed, reset or timed out. A client that sent part of a request
      // and then closed its side still gets an answer.
      if (ec == asio::error::eof && buffer_.size() > 0 && socket_.is_open()) {
        Respond(TextResponse(400, "incomplete request\n"), false);
      } else {
        Close();
      }
      return;
    }
    const auto data = buffer_.data();
    const std::string head(asio::buffers_begin(data), asio::buffers_begin(data) + n);
    HttpRequest request;
    if (Status bad = ParseHttpRequestHead(head, &request); !bad.ok()) {
      Respond(TextResponse(400, bad.message() + "\n"), false);
      return;
    }
    if (request.method != "GET") {
      Respond(TextResponse(405, "only GET is supported\n"), true);
      return;
    }
    Respond(server_->Dispatch(request), false);
  }

  void Respond(const HttpResponse& response, bool allow_get) {
    out_ = Serialize(response, allow_get);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_),
                      [self](const boost::system::error_code& ec, size_t) {
                        if (ec) {
                          self->Close();
                          return;
                        }
                        boost::system::error_code ignored;
                        self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                        // Bound the drain; cancels the read deadline's wait.
                        self->deadline_.expires_after(kLinger);
                        self->deadline_.async_wait([self](const boost::system::error_code& ec) {
                          if (!ec) self->Close();
                        });
                        self->Drain();
                      });
  }

  // Discards input until the client closes (or the linger deadline).
  void Drain() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(discard_),
                            [self](const boost::system::error_code& ec, size_t) {
                              if (ec) {
                                self->Close();
                              } else {
                                self->Drain();
                              }
                            });
  }

  HttpServer* const server_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  asio::streambuf buffer_;
  std::string out_;
  char discard_[512];
};

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)), impl_(new Impl) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(const std::string& path, Handler handler) {
  handlers_[path] = std::move(handler);
}

void HttpServer::Every(std::chrono::milliseconds interval, std::function<void()> task) {
  tasks_.emplace_back(interval, std::move(task));
}

Status HttpServer::Start() {
  const std::string where = options_.address + ":" + std::to_string(options_.port);
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.address, ec);
  if (ec) {
    return Status::InvalidArgument("'" + options_.address +
                                   "' is not an IPv4 or IPv6 address: " + ec.message());
  }
  if (options_.port < 0 || options_.port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(options_.port) + " out of range");
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  tcp::acceptor& acceptor = impl_->acceptor;
  if (!acceptor.open(endpoint.protocol(), ec)) {
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!acceptor.bind(endpoint, ec)) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    return Status::IOError("cannot listen on " + where + ": " + ec.message());
  }
  port_ = acceptor.local_endpoint(ec).port();
  Accept();
  for (auto& [interval, task] : tasks_) {
    impl_->tasks.push_back(std::make_unique<Periodic>(impl_->io, interval, &task));
    impl_->tasks.back()->timer.expires_after(interval);
    impl_->tasks.back()->Arm();
  }
  thread_ = std::thread([this] {
    try {
      impl_->io.run();
    } catch (const std::exception& e) {
      LOG(ERROR) << "HTTP server thread: " << e.what();
    }
  });
  return Status::OK();
}

void HttpServer::Accept() {
  impl_->acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (impl_->stopped || !impl_->acceptor.is_open()) return;
    if (!ec) {
      if (open_connections_.load() >= options_.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);  // over the limit: refuse rather than queue
      } else {
        auto c = std::make_shared<Connection>(this, std::move(socket));
        auto& list = impl_->connections;
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [](const std::weak_ptr<Connection>& w) { return w.expired(); }),
                   list.end());
        list.push_back(c);
        c->Start();
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    } else {
      // EMFILE and the like: keep accepting; the connection limit keeps
      // this from spinning in the common case.
      LOG_EVERY_N(WARNING, 100) << "HTTP server: accept failed: " << ec.message();
    }
    Accept();
  });
}

HttpResponse HttpServer::Dispatch(const HttpRequest& request) {
  auto it = handlers_.find(request.path);
  if (it == handlers_.end()) return TextResponse(404, "not found: " + request.path + "\n");
  try {
    return it->second(request);
  } catch (const std::exception& e) {
    LOG(ERROR) << "HTTP handler of " << request.path << " failed: " << e.what();
    return TextResponse(500, "internal error\n");
  }
}

void HttpServer::Stop() {
  if (!impl_) return;
  if (thread_.joinable()) {
    // Close everything on the server's own thread, then let run() return.
    asio::post(impl_->io, [this] {
      impl_->stopped = true;
      boost::system::error_code ignored;
      impl_->acceptor.close(ignored);
      for (auto& t : impl_->tasks) t->timer.cancel();
      for (auto& w : impl_->connections) {
        if (auto c = w.lock()) c->Close();
      }
      impl_->connections.clear();
    });
    thread_.join();  // run() returns once no operation is pending
  }
  impl_.reset();  // destroys whatever handlers remain (none after a clean run)
}

}  // namespace raftkv
