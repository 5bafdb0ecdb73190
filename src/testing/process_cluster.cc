#include "testing/process_cluster.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#ifndef RAFTKV_BIN_DIR
#error "RAFTKV_BIN_DIR must be defined (the build directory holding raftkv-server)"
#endif

namespace raftkv {
namespace integration {

namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t MillisSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
}

// Ports handed out by this process: never handed out twice, so a cluster
// never meets a port a previous cluster's (dead) server may still hold.
std::mutex g_ports_mu;
std::set<int> g_used_ports;

// Whether 127.0.0.1:port can be bound right now.
bool PortIsFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  if (!ok) return false;
  // Also make sure nobody listens on the wildcard address for this port.
  const int fd2 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd2 < 0) return false;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool ok2 = ::bind(fd2, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd2);
  return ok2;
}

// Everything the child needs, prepared before fork() (after fork only
// async-signal-safe calls are allowed: the test process is multi-threaded).
struct ExecPlan {
  std::string binary;
  std::vector<std::string> args;  // argv[1..]
  std::string output_path;
};

// fork + exec; stdout/stderr appended to plan.output_path, stdin /dev/null.
// The child dies with the forking thread (PR_SET_PDEATHSIG). -1 on failure.
pid_t Spawn(const ExecPlan& plan) {
  std::vector<std::string> storage;
  storage.push_back(plan.binary);
  storage.insert(storage.end(), plan.args.begin(), plan.args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const char* out_path = plan.output_path.c_str();
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::setpgid(0, 0);  // a Ctrl-C at the terminal goes to the test only
    const int out = ::open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0) ::_exit(125);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
    {
      for (int fd = 3; fd < 65536; ++fd) ::close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(argv[0], argv.data());
    static const char kMsg[] = "process_cluster: execv failed\n";
    ssize_t ignored = ::write(2, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    ::_exit(127);
  }
  return pid;
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string Tail(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  return "[...]" + text.substr(text.size() - bytes);
}

void AppendToFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

// Where gdb is installed, appends the stacks of every thread of `pid` to
// `path`: a server that does not stop when asked is stuck somewhere, and its
// stacks say where before SIGKILL erases it.
void AppendStacks(pid_t pid, const std::string& path) {
  if (std::system("command -v gdb >/dev/null 2>&1") != 0) return;
  AppendToFile(path, "=== process_cluster: stacks of pid " + std::to_string(pid) + " (gdb)\n");
  const std::string cmd = "timeout 120 gdb -p " + std::to_string(pid) +
                          " -batch -nx -ex 'thread apply all bt 40' >> '" + path + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) AppendToFile(path, "=== process_cluster: gdb failed\n");
}

std::string NowString() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  char buf[64];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char out[80];
  std::snprintf(out, sizeof(out), "%s.%03d", buf, static_cast<int>(ms));
  return out;
}

// Whether the binaries under test are built with sanitizers (CMake sets
// RAFTKV_SANITIZED with RAFTKV_SANITIZE).
#ifdef RAFTKV_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

std::string FindSanitizerReports(const std::string& text) {
  static const char* const kMarkers[] = {
      "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
      "ERROR: ThreadSanitizer", ": runtime error: ",  // UBSan
      "SUMMARY: UndefinedBehaviorSanitizer"};
  constexpr size_t kContextLines = 40;
  constexpr size_t kMaxBytes = 12000;
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  size_t shown_until = 0;  // lines before this index are already in `out`
  for (size_t i = 0; i < lines.size() && out.size() < kMaxBytes; ++i) {
    bool hit = false;
    for (const char* m : kMarkers) hit = hit || lines[i].find(m) != std::string::npos;
    if (!hit) continue;
    if (i >= shown_until && !out.empty()) out += "[...]\n";
    for (size_t j = std::max(i, shown_until); j < std::min(lines.size(), i + kContextLines); ++j) {
      out += lines[j] + "\n";
    }
    shown_until = std::max(shown_until, i + kContextLines);
  }
  if (out.size() > kMaxBytes) out = out.substr(0, kMaxBytes) + "[...]\n";
  return out;
}

std::string ServerBinary() { return std::string(RAFTKV_BIN_DIR) + "/raftkv-server"; }
std::string CtlBinary() { return std::string(RAFTKV_BIN_DIR) + "/raftkvctl"; }

std::vector<std::string> FastTimeoutFlags() {
  // Election timeout 400..800 ms (default 500..1000), heartbeat every 60 ms:
  // elections start sooner, but the check-quorum window stays long enough
  // that a 2-core machine shared with other test binaries does not depose
  // healthy leaders (a 250 ms window did, several times a minute).
  return {"--tick_ms=20", "--election_ticks=20", "--heartbeat_ticks=3"};
}

std::vector<int> PickFreePorts(int count) {
  // Below the Linux ephemeral range (32768..60999 by default).
  constexpr int kLow = 20000;
  constexpr int kHigh = 32000;
  std::lock_guard<std::mutex> lock(g_ports_mu);
  std::mt19937 rng(static_cast<uint32_t>(::getpid()) * 2654435761u ^
                   static_cast<uint32_t>(SteadyClock::now().time_since_epoch().count()));
  std::vector<int> ports;
  int port = kLow + static_cast<int>(rng() % (kHigh - kLow));
  for (int tries = 0; tries < kHigh - kLow && static_cast<int>(ports.size()) < count; ++tries) {
    port = port + 1 >= kHigh ? kLow : port + 1;
    if (g_used_ports.count(port) != 0) continue;
    if (!PortIsFree(port)) continue;
    g_used_ports.insert(port);
    ports.push_back(port);
  }
  if (static_cast<int>(ports.size()) != count) {
    ADD_FAILURE() << "could not find " << count << " free ports in " << kLow << ".." << kHigh;
  }
  return ports;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                          const std::string& scratch_dir, int timeout_ms) {
  static std::atomic<int> counter{0};
  RunResult result;
  ExecPlan plan;
  plan.binary = binary;
  plan.args = args;
  plan.output_path = scratch_dir + "/run-" + std::to_string(counter++) + ".out";
  const pid_t pid = Spawn(plan);
  if (pid < 0) {
    result.output = std::string("fork failed: ") + std::strerror(errno);
    return result;
  }
  const auto start = SteadyClock::now();
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (MillisSince(start) > timeout_ms) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.exited = !result.timed_out && WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.output = ReadFileOrEmpty(plan.output_path);
  return result;
}

bool WaitUntil(const std::function<bool()>& predicate, int timeout_ms, int poll_ms) {
  const auto start = SteadyClock::now();
  for (;;) {
    if (predicate()) return true;
    if (MillisSince(start) >= timeout_ms) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

uint64_t TestSeed() {
  if (const char* env = std::getenv("RAFTKV_TEST_SEED")) {
    return std::strtoull(env, nullptr, 10);
  }
  return static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count()) ^
         (static_cast<uint64_t>(::getpid()) << 32);
}

// ---------------------------------------------------------------------------

ProcessCluster::ProcessCluster(int n, std::vector<std::string> extra_flags)
    : extra_flags_(std::move(extra_flags)) {
  char tmpl[] = "/tmp/raftkv-integ-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    dir_ = "/tmp/raftkv-integ-failed";
  } else {
    dir_ = tmpl;
  }
  const std::vector<int> ports = PickFreePorts(n);
  std::string conf = "# written by the raftkv integration tests: <id> <host:port>\n";
  for (int i = 1; i <= n; ++i) {
    Node nd;
    nd.id = i;
    nd.port = i - 1 < static_cast<int>(ports.size()) ? ports[i - 1] : 0;
    nodes_.push_back(std::move(nd));
    conf += std::to_string(i) + " 127.0.0.1:" + std::to_string(nodes_.back().port) + "\n";
    std::filesystem::create_directories(LogDir(i));
    std::filesystem::create_directories(DataDir(i));
  }
  std::ofstream(cluster_file()) << conf;
}

ProcessCluster::~ProcessCluster() {
  // Sanitized servers get to exit normally, so that LeakSanitizer runs and
  // shutdown races are seen; otherwise SIGKILL is quicker.
  if (kSanitized) StopAllAndCollectSanitizerReports();
  for (int i = 1; i <= size(); ++i) {
    Node& nd = node(i);
    if (nd.pid > 0) {
      ::kill(nd.pid, SIGKILL);
      int status = 0;
      ::waitpid(nd.pid, &status, 0);
      nd.pid = -1;
    }
    nd.status_client.reset();
  }
  std::string reports;
  for (int i = 1; i <= size(); ++i) {
    const std::string r = SanitizerReports(i);
    if (!r.empty()) reports += "----- member " + std::to_string(i) + " -----\n" + r;
  }
  if (!reports.empty()) {
    keep_dir_ = true;
    if (::testing::UnitTest::GetInstance()->current_test_info() != nullptr) {
      ADD_FAILURE() << "sanitizer reports in the output of raftkv-server (" << dir_ << "):\n"
                    << reports;
    } else {
      std::cerr << "process_cluster: sanitizer reports in the output of raftkv-server:\n"
                << reports << std::flush;
    }
  }
  const bool failed = ::testing::Test::HasFailure();
  if (failed || keep_dir_) {
    std::cerr << "[ cluster  ] kept " << dir_ << " (server output and logs)" << std::endl;
  } else {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

ProcessCluster::Node& ProcessCluster::node(int i) {
  if (i < 1 || i > size()) {
    std::cerr << "process_cluster: no member " << i << std::endl;
    std::abort();
  }
  return nodes_[static_cast<size_t>(i - 1)];
}

const ProcessCluster::Node& ProcessCluster::node(int i) const {
  return const_cast<ProcessCluster*>(this)->node(i);
}

std::string ProcessCluster::NodeDir(int i) const { return dir_ + "/node" + std::to_string(i); }

std::string ProcessCluster::Endpoint(int i) const {
  return "127.0.0.1:" + std::to_string(node(i).port);
}

int ProcessCluster::Port(int i) const { return node(i).port; }

std::vector<std::string> ProcessCluster::Endpoints() const {
  std::vector<std::string> eps;
  for (int i = 1; i <= size(); ++i) {
    if (!node(i).removed) eps.push_back(Endpoint(i));
  }
  return eps;
}

int ProcessCluster::AddNode(std::vector<std::string> node_flags) {
  Node nd;
  nd.id = size() + 1;
  const std::vector<int> ports = PickFreePorts(1);
  nd.port = ports.empty() ? 0 : ports[0];
  nd.joiner = true;
  nd.flags = std::move(node_flags);
  nd.metrics_port = NextMetricsPort(nd.id);
  nodes_.push_back(std::move(nd));
  const int i = size();
  std::filesystem::create_directories(LogDir(i));
  std::filesystem::create_directories(DataDir(i));
  return i;
}

bool ProcessCluster::IsJoiner(int i) const { return node(i).joiner; }

void ProcessCluster::SetNodeFlags(int i, std::vector<std::string> flags) {
  node(i).flags = std::move(flags);
}

void ProcessCluster::MarkRemoved(int i, bool removed) { node(i).removed = removed; }

void ProcessCluster::EnableMetrics(int base) {
  metrics_enabled_ = true;
  metrics_port_base_ = base;
  for (Node& nd : nodes_) nd.metrics_port = NextMetricsPort(nd.id);
}

int ProcessCluster::NextMetricsPort(int id) {
  if (!metrics_enabled_) return 0;
  if (metrics_port_base_ != 0) return metrics_port_base_ + id;
  const std::vector<int> ports = PickFreePorts(1);
  return ports.empty() ? 0 : ports[0];
}

int ProcessCluster::MetricsPort(int i) const { return node(i).metrics_port; }

bool ProcessCluster::IsRemoved(int i) const { return node(i).removed; }

bool ProcessCluster::StartAll(std::string* error) {
  for (int i = 1; i <= size(); ++i) {
    if (!Start(i)) {
      if (error) *error = "cannot start member " + std::to_string(i);
      return false;
    }
  }
  // Catch servers that die at once (bad flag, port taken, ...).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 1; i <= size(); ++i) {
    if (!IsRunning(i)) {
      if (error) {
        *error = "member " + std::to_string(i) + " exited with status " +
                 std::to_string(node(i).last_exit) + ":\n" + Tail(ServerOutput(i), 3000);
      }
      return false;
    }
  }
  return true;
}

bool ProcessCluster::Start(int i, const std::vector<std::string>& more_flags) {
  Node& nd = node(i);
  if (IsRunning(i)) return false;
  ExecPlan plan;
  plan.binary = ServerBinary();
  plan.output_path = OutputPath(i);
  plan.args = {
      "--id=" + std::to_string(i),
      "--cluster_file=" + cluster_file(),
      "--data_dir=" + DataDir(i),
      "--log_dir=" + LogDir(i),
      "--listen_address=127.0.0.1:" + std::to_string(nd.port),
      "--logbufsecs=0",  // glog: flush every line (we read the logs, and SIGKILL)
  };
  if (nd.joiner) plan.args.push_back("--join");
  if (nd.metrics_port != 0) {
    plan.args.push_back("--metrics_address=127.0.0.1");
    plan.args.push_back("--metrics_port=" + std::to_string(nd.metrics_port));
  }
  plan.args.insert(plan.args.end(), extra_flags_.begin(), extra_flags_.end());
  plan.args.insert(plan.args.end(), nd.flags.begin(), nd.flags.end());
  plan.args.insert(plan.args.end(), more_flags.begin(), more_flags.end());
  std::string banner = "=== process_cluster: start #" + std::to_string(nd.starts + 1) +
                       " of member " + std::to_string(i) + " at " + NowString() + ":";
  for (const std::string& a : plan.args) banner += " " + a;
  AppendToFile(plan.output_path, banner + "\n");
  const pid_t pid = Spawn(plan);
  if (pid < 0) {
    ADD_FAILURE() << "fork failed: " << std::strerror(errno);
    return false;
  }
  nd.pid = pid;
  nd.last_pid = pid;
  ++nd.starts;
  nd.status_client.reset();  // the old channel may still be failing fast
  return true;
}

bool ProcessCluster::Reap(int i, bool block) {
  Node& nd = node(i);
  if (nd.pid <= 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(nd.pid, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  nd.last_exit = r == nd.pid ? DecodeWaitStatus(status) : -1;
  AppendToFile(OutputPath(i), "=== process_cluster: member " + std::to_string(i) + " (pid " +
                                  std::to_string(nd.pid) + ") ended with status " +
                                  std::to_string(nd.last_exit) + " at " + NowString() + "\n");
  nd.pid = -1;
  return true;
}

bool ProcessCluster::IsRunning(int i) {
  Node& nd = node(i);
  if (nd.pid <= 0) return false;
  return !Reap(i, false);
}

pid_t ProcessCluster::Pid(int i) const { return node(i).pid; }

void ProcessCluster::Kill(int i) {
  Node& nd = node(i);
  if (nd.pid <= 0) return;
  ::kill(nd.pid, SIGKILL);
  Reap(i, true);
}

bool ProcessCluster::Stop(int i, int timeout_ms) {
  Node& nd = node(i);
  if (nd.pid <= 0) return false;
  ::kill(nd.pid, SIGTERM);
  const auto start = SteadyClock::now();
  while (!Reap(i, false)) {
    if (MillisSince(start) > timeout_ms) {
      ::kill(nd.pid, SIGKILL);
      Reap(i, true);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return nd.last_exit == 0;
}

bool ProcessCluster::WaitForExit(int i, int timeout_ms, int* exit_code) {
  const bool exited = WaitUntil([&] { return !IsRunning(i); }, timeout_ms, 10);
  if (exited && exit_code != nullptr) *exit_code = node(i).last_exit;
  return exited;
}

grpc::Status ProcessCluster::StatusOf(int i, StatusResponse* out, int timeout_ms) {
  Node& nd = node(i);
  if (nd.starts == 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "member never started");
  if (!nd.status_client) {
    ClientOptions options;
    options.endpoints = {Endpoint(i)};
    options.timeout_ms = timeout_ms;
    options.rpc_timeout_ms = timeout_ms;
    nd.status_client = std::make_unique<KvClient>(options);
  }
  grpc::Status s = nd.status_client->StatusOf(Endpoint(i), out, timeout_ms);
  // A KvClient channel whose connection attempts failed can keep failing
  // fast for seconds after the server is up (test
  // ClientStartedBeforeClusterConnects); the harness must observe the server,
  // not that, so it starts over with a new client after any failure.
  if (!s.ok()) nd.status_client.reset();
  return s;
}

uint64_t ProcessCluster::WaitForLeader(int timeout_ms, std::string* error) {
  const auto start = SteadyClock::now();
  std::string last;
  for (;;) {
    std::map<int, StatusResponse> answers;
    std::string round;
    int members = 0;
    for (int i = 1; i <= size(); ++i) {
      if (node(i).removed) continue;
      ++members;
      if (!IsRunning(i)) {
        round += " [" + std::to_string(i) + ": not running]";
        continue;
      }
      StatusResponse st;
      grpc::Status s = StatusOf(i, &st, 300);
      if (!s.ok()) {
        round += " [" + std::to_string(i) + ": " + StatusCodeName(s.error_code()) + "]";
        continue;
      }
      round += " [" + std::to_string(i) + ": " + st.role() + " term " + std::to_string(st.term()) +
               " leader " + std::to_string(st.leader_id()) + "]";
      answers[i] = st;
    }
    last = round;
    if (!answers.empty() && static_cast<int>(answers.size()) * 2 > members) {
      const uint64_t leader = answers.begin()->second.leader_id();
      const uint64_t term = answers.begin()->second.term();
      bool agree = leader != 0;
      for (const auto& [id, st] : answers) {
        if (st.leader_id() != leader || st.term() != term) agree = false;
      }
      if (agree) {
        auto it = answers.find(static_cast<int>(leader));
        if (it != answers.end() && it->second.role() == "leader") {
          last_leader_term_ = term;
          return leader;
        }
      }
    }
    if (MillisSince(start) >= timeout_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (error) *error = "no agreed leader within " + std::to_string(timeout_ms) + " ms; last:" + last;
  return 0;
}

std::unique_ptr<KvClient> ProcessCluster::NewClient(int timeout_ms, int rpc_timeout_ms) const {
  ClientOptions options;
  options.endpoints = Endpoints();
  options.timeout_ms = timeout_ms;
  options.rpc_timeout_ms = rpc_timeout_ms;
  return std::make_unique<KvClient>(options);
}

std::unique_ptr<KvClient> ProcessCluster::NewClientFor(int i, int timeout_ms,
                                                       int rpc_timeout_ms) const {
  ClientOptions options;
  options.endpoints = {Endpoint(i)};
  options.timeout_ms = timeout_ms;
  options.rpc_timeout_ms = rpc_timeout_ms;
  return std::make_unique<KvClient>(options);
}

std::string ProcessCluster::ServerOutput(int i) const { return ReadFileOrEmpty(OutputPath(i)); }

std::string ProcessCluster::LogText(int i) const {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(LogDir(i).c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      // raftkv-server.<host>.<user>.log.INFO.<yyyymmdd-hhmmss>.<pid>; the
      // INFO file holds the messages of every severity.
      if (name.find(".log.INFO.") != std::string::npos) names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) text += ReadFileOrEmpty(LogDir(i) + "/" + name);
  return text;
}

std::string ProcessCluster::LastRunLogText(int i) const {
  const Node& nd = node(i);
  if (nd.last_pid <= 0) return "";
  // raftkv-server.<host>.<user>.log.INFO.<yyyymmdd-hhmmss>.<pid>
  const std::string suffix = "." + std::to_string(nd.last_pid);
  std::string text;
  if (DIR* d = ::opendir(LogDir(i).c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.find(".log.INFO.") != std::string::npos && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        text += ReadFileOrEmpty(LogDir(i) + "/" + name);
      }
    }
    ::closedir(d);
  }
  return text;
}

std::string ProcessCluster::LastRunOutput(int i) const {
  const std::string out = ServerOutput(i);
  const size_t at = out.rfind("=== process_cluster: start #");
  return at == std::string::npos ? out : out.substr(at);
}

std::vector<std::string> ProcessCluster::SegmentFiles(int i) const {
  const std::string dir = DataDir(i) + "/log";
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".seg") == 0) names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (std::string& n : names) n = dir + "/" + n;
  return names;
}

std::vector<uint64_t> ProcessCluster::SegmentFirstIndexes(int i) const {
  std::vector<uint64_t> out;
  for (const std::string& path : SegmentFiles(i)) {
    const std::string name = std::filesystem::path(path).filename().string();
    out.push_back(std::strtoull(name.c_str(), nullptr, 10));
  }
  return out;
}

uint64_t ProcessCluster::LogBytes(int i) const {
  uint64_t total = 0;
  for (const std::string& path : SegmentFiles(i)) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) total += size;
  }
  return total;
}

uint64_t ProcessCluster::DataDirBytes(int i) const {
  uint64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  // Files come and go while the server runs: skip what vanished.
  for (auto it = std::filesystem::recursive_directory_iterator(
           DataDir(i), std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (seen.emplace(st.st_dev, st.st_ino).second) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

bool ParseSnapshotName(const std::string& name, uint64_t* index, uint64_t* term) {
  unsigned long long a = 0, b = 0;
  char tail[8] = {0};
  int used = 0;
  if (std::sscanf(name.c_str(), "snap-%llu-%llu%7s%n", &a, &b, tail, &used) != 3) return false;
  if (std::string(tail) != ".snap" || used != static_cast<int>(name.size())) return false;
  if (index != nullptr) *index = a;
  if (term != nullptr) *term = b;
  return true;
}

bool ParseCheckpointName(const std::string& name, uint64_t* index, uint64_t* term) {
  unsigned long long a = 0, b = 0;
  int used = 0;
  if (name.compare(0, 5, "ckpt-") != 0 ||
      std::sscanf(name.c_str(), "ckpt-%llu-%llu%n", &a, &b, &used) != 2 ||
      used != static_cast<int>(name.size())) {
    return false;
  }
  if (index != nullptr) *index = a;
  if (term != nullptr) *term = b;
  return true;
}

bool ParseAnySnapshotName(const std::string& name, uint64_t* index, uint64_t* term) {
  return ParseSnapshotName(name, index, term) || ParseCheckpointName(name, index, term);
}

std::vector<std::string> ProcessCluster::SnapshotFiles(int i) const {
  std::vector<std::string> out;
  for (std::string& path : Snapshots(i)) {
    if (ParseSnapshotName(std::filesystem::path(path).filename().string(), nullptr, nullptr)) {
      out.push_back(std::move(path));
    }
  }
  return out;
}

std::vector<std::string> ProcessCluster::Snapshots(int i) const {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           DataDir(i), std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    uint64_t index = 0;
    std::error_code type_ec;
    if (it->is_directory(type_ec) && ParseCheckpointName(name, &index, nullptr)) {
      found.emplace_back(index, it->path().string());
      it.disable_recursion_pending();  // its files are a store's, not snapshots
    } else if (ParseSnapshotName(name, &index, nullptr)) {
      found.emplace_back(index, it->path().string());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string ProcessCluster::SanitizerReports(int i) const {
  return FindSanitizerReports(ServerOutput(i));
}

std::string ProcessCluster::StopAllAndCollectSanitizerReports(int timeout_ms) {
  for (int i = 1; i <= size(); ++i) {
    if (node(i).pid > 0) {
      ::kill(node(i).pid, SIGCONT);  // a paused member cannot handle SIGTERM
      ::kill(node(i).pid, SIGTERM);
    }
  }
  const auto start = SteadyClock::now();
  for (int i = 1; i <= size(); ++i) {
    while (!Reap(i, false)) {
      if (MillisSince(start) > timeout_ms) {
        AppendToFile(OutputPath(i), "=== process_cluster: no exit " + std::to_string(timeout_ms) +
                                        " ms after SIGTERM; SIGKILL\n");
        AppendStacks(node(i).pid, OutputPath(i));
        ::kill(node(i).pid, SIGKILL);
        Reap(i, true);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::string reports;
  for (int i = 1; i <= size(); ++i) {
    const std::string r = SanitizerReports(i);
    if (!r.empty()) reports += "----- member " + std::to_string(i) + " -----\n" + r;
  }
  return reports;
}

std::string ProcessCluster::Describe(size_t tail_bytes) const {
  std::ostringstream out;
  out << "cluster in " << dir_ << "\n";
  for (int i = 1; i <= size(); ++i) {
    const Node& nd = node(i);
    out << "----- member " << i << " (" << Endpoint(i) << "): "
        << (nd.pid > 0 ? "running pid " + std::to_string(nd.pid)
                       : "not running, last status " + std::to_string(nd.last_exit))
        << " -----\n";
    out << "--- server.out (tail) ---\n" << Tail(ServerOutput(i), tail_bytes / 3) << "\n";
    out << "--- glog (tail) ---\n" << Tail(LogText(i), tail_bytes) << "\n";
  }
  return out.str();
}

}  // namespace integration
}  // namespace raftkv
