// Writes the seed corpora of the fuzz targets: a few valid inputs each, made
// with the real storage code, so the fuzzers start from meaningful inputs.
//   fuzz_make_corpus <dir>      (normally src/fuzz/corpus)
// writes <dir>/<target>/seed-<n>. The files are checked in; rerun this after
// an input format changes.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_raft_step.h"
#include "storage/hard_state_file.h"
#include "storage/log_store.h"

namespace fs = std::filesystem;
using namespace raftkv;

namespace {

std::string out_dir;
fs::path scratch;

void Put8(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void Chunk(std::string* s, const std::string& bytes) {
  Put8(s, bytes.size(), 2);
  *s += bytes;
}

void Seed(const std::string& target, int n, const std::string& bytes) {
  fs::create_directories(fs::path(out_dir) / target);
  std::ofstream out(fs::path(out_dir) / target / ("seed-" + std::to_string(n)), std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Entry MakeEntry(uint64_t index, uint64_t term, const std::string& data) {
  Entry e;
  e.set_index(index);
  e.set_term(term);
  e.set_type(data.empty() ? ENTRY_NOOP : ENTRY_COMMAND);
  e.set_data(data);
  return e;
}

std::string PutCmd(const std::string& key, const std::string& value) {
  Command c;
  c.set_op(Command::PUT);
  c.set_key(key);
  c.set_value(value);
  return c.SerializeAsString();
}

// A log of `n` entries written by SegmentedLog with small segments, packed in
// the fuzz_log_recovery input format; `tail` is appended to the last segment.
std::string LogInput(int n, uint64_t max_segment_bytes, const std::string& tail) {
  const fs::path dir = scratch / "log";
  fs::remove_all(dir);
  {
    SegmentedLogOptions options;
    options.max_segment_bytes = max_segment_bytes;
    std::unique_ptr<SegmentedLog> log;
    Status s = SegmentedLog::Open(dir.string(), options, &log, nullptr);
    if (!s.ok()) std::abort();
    for (int i = 1; i <= n; ++i) {
      s = log->Append({MakeEntry(i, 1 + i / 3, i == 1 ? "" : PutCmd("k" + std::to_string(i), "v"))});
      if (!s.ok()) std::abort();
    }
    if (!log->Sync().ok()) std::abort();
  }
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir)) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  std::string input;
  input.push_back(static_cast<char>((max_segment_bytes - 16) / 8));
  input.push_back(static_cast<char>(files.empty() ? 0 : files.size() - 1));
  for (size_t i = 0; i < files.size(); ++i) {
    std::string bytes = ReadFile(files[i]);
    if (i + 1 == files.size()) bytes += tail;
    Put8(&input, std::stoull(files[i].filename().string().substr(0, 20)), 2);
    Put8(&input, bytes.size(), 4);
    input += bytes;
  }
  return input;
}

void LogRecoverySeeds() {
  Seed("fuzz_log_recovery", 1, LogInput(0, 1024, ""));
  Seed("fuzz_log_recovery", 2, LogInput(3, 1024, ""));
  Seed("fuzz_log_recovery", 3, LogInput(6, 64, ""));               // several segments
  Seed("fuzz_log_recovery", 4, LogInput(4, 1024, std::string("\x12\x34\x56", 3)));  // torn
  Seed("fuzz_log_recovery", 5, LogInput(5, 64, std::string(11, '\0')));
  std::string fixed = LogInput(6, 64, "");
  fixed[1] = static_cast<char>(fixed[1] | 0x80);  // the harness fixes up CRCs
  Seed("fuzz_log_recovery", 6, fixed);
}

void HardStateSeeds() {
  const fs::path path = scratch / "hs";
  int n = 0;
  for (HardState hs : {HardState{0, 0}, HardState{1, 1}, HardState{7, 3},
                       HardState{UINT64_MAX, UINT64_MAX}}) {
    HardStateFile f(path.string());
    if (!f.Save(hs).ok()) std::abort();
    Seed("fuzz_hard_state", ++n, ReadFile(path));
  }
}

void StateMachineSeeds() {
  auto cmd = [](Command::Op op, const std::string& k, const std::string& v, bool has_expected,
                const std::string& expected) {
    Command c;
    c.set_op(op);
    c.set_key(k);
    c.set_value(v);
    c.set_has_expected(has_expected);
    c.set_expected(expected);
    return c.SerializeAsString();
  };
  std::string a;
  a.push_back(0);
  Chunk(&a, MakeEntry(1, 1, "").SerializeAsString());
  a.push_back(0);
  Chunk(&a, MakeEntry(2, 1, cmd(Command::PUT, "a", "1", false, "")).SerializeAsString());
  a.push_back(3);  // COMMAND with raw data
  Chunk(&a, cmd(Command::CAS, "a", "2", true, "1"));
  a.push_back(3);
  Chunk(&a, cmd(Command::CAS, "b", "x", false, ""));
  a.push_back(3);
  Chunk(&a, cmd(Command::DELETE, "a", "", false, ""));
  a.push_back(3);
  Chunk(&a, cmd(Command::CAS, "b", "y", true, "wrong"));
  Seed("fuzz_state_machine", 1, a);
  std::string b;
  b.push_back(3);
  Chunk(&b, "\xff\xff garbage");
  b.push_back(5);  // unknown entry type 2
  Chunk(&b, cmd(Command::PUT, "k", "v", false, ""));
  b.push_back(3);
  Chunk(&b, cmd(static_cast<Command::Op>(9), "k", "v", false, ""));
  Seed("fuzz_state_machine", 2, b);

  // A session: opened at index 1 (its id), duplicates, a stale sequence, an
  // expiry by cluster time, a close.
  auto session_cmd = [](Command::Op op, const std::string& k, uint64_t client, uint64_t seq,
                        uint64_t first, uint64_t timeout) {
    Command c;
    c.set_op(op);
    c.set_key(k);
    c.set_value("v" + std::to_string(seq));
    c.set_client_id(client);
    c.set_sequence(seq);
    c.set_first_outstanding(first);
    c.set_session_timeout_ms(timeout);
    return c.SerializeAsString();
  };
  auto timed = [](uint64_t index, uint64_t time_ms, const std::string& data) {
    Entry e = MakeEntry(index, 1, data);
    e.set_cluster_time_ms(time_ms);
    return e.SerializeAsString();
  };
  std::string c;
  const std::vector<std::string> entries = {
      timed(1, 0, session_cmd(Command::OPEN_SESSION, "", 0, 0, 0, 1000)),
      timed(2, 10, session_cmd(Command::PUT, "a", 1, 1, 1, 0)),
      timed(3, 20, session_cmd(Command::PUT, "a", 1, 1, 1, 0)),      // duplicate
      timed(4, 30, session_cmd(Command::CAS, "b", 1, 2, 2, 0)),
      timed(5, 40, session_cmd(Command::DELETE, "a", 1, 3, 3, 0)),
      timed(6, 50, session_cmd(Command::PUT, "a", 1, 2, 2, 0)),      // stale
      timed(7, 60, session_cmd(Command::OPEN_SESSION, "", 0, 0, 0, 100)),
      timed(8, 500, session_cmd(Command::PUT, "c", 7, 1, 1, 0)),     // session 7 expired
      timed(9, 510, session_cmd(Command::CLOSE_SESSION, "", 1, 0, 0, 0)),
      timed(10, 520, session_cmd(Command::PUT, "d", 1, 4, 4, 0)),    // closed
  };
  for (const std::string& e : entries) {
    c.push_back(0);
    Chunk(&c, e);
  }
  Seed("fuzz_state_machine", 3, c);

  // Batches: plain, in a session with a duplicate and a sequence reused by a
  // PUT afterwards, and one holding a CAS (refused whole).
  auto batch = [](uint64_t client, uint64_t seq, Command::Op second) {
    Command c;
    c.set_op(Command::BATCH);
    c.set_client_id(client);
    c.set_sequence(seq);
    c.set_first_outstanding(seq == 0 ? 0 : 1);
    for (Command::Op op : {Command::PUT, second, Command::DELETE}) {
      Command* o = c.add_ops();
      o->set_op(op);
      o->set_key(op == Command::DELETE ? "x" : "y");
      o->set_value("b" + std::to_string(seq));
    }
    return c.SerializeAsString();
  };
  std::string d;
  const std::vector<std::string> batches = {
      timed(1, 0, session_cmd(Command::OPEN_SESSION, "", 0, 0, 0, 1000)),
      timed(2, 10, batch(0, 0, Command::PUT)),
      timed(3, 20, batch(1, 1, Command::DELETE)),
      timed(4, 30, batch(1, 1, Command::DELETE)),                   // duplicate
      timed(5, 40, session_cmd(Command::PUT, "y", 1, 1, 1, 0)),     // same sequence: duplicate
      timed(6, 50, batch(0, 0, Command::CAS)),                      // refused whole
  };
  for (const std::string& e : batches) {
    d.push_back(0);
    Chunk(&d, e);
  }
  Seed("fuzz_state_machine", 4, d);
}

void KvRequestSeeds() {
  std::string s;
  s.push_back(8);   // max_key_bytes
  s.push_back(16);  // max_value_bytes
  PutRequest put;
  put.set_key("key");
  put.set_value("value");
  s.push_back(0);
  Chunk(&s, put.SerializeAsString());
  GetRequest get;
  get.set_key("key");
  s.push_back(1);
  Chunk(&s, get.SerializeAsString());
  CompareAndSwapRequest cas;
  cas.set_key("key");
  cas.set_has_expected(true);
  cas.set_expected("value");
  cas.set_value("new");
  s.push_back(3);
  Chunk(&s, cas.SerializeAsString());
  DeleteRequest del;
  del.set_key("key");
  s.push_back(2);
  Chunk(&s, del.SerializeAsString());
  put.set_key("a-key-too-long");
  s.push_back(0);
  Chunk(&s, put.SerializeAsString());
  s.push_back(0);
  Chunk(&s, "");  // empty key
  BatchRequest batch;
  for (const char* key : {"b1", "key", "b1"}) {
    BatchOp* op = batch.add_ops();
    op->set_op(std::string(key) == "key" ? BatchOp::DELETE : BatchOp::PUT);
    op->set_key(key);
    if (op->op() == BatchOp::PUT) op->set_value("v");
  }
  s.push_back(4);
  Chunk(&s, batch.SerializeAsString());
  Seed("fuzz_kv_requests", 1, s);
}

void RaftSeeds() {
  using namespace raftkv::fuzz;
  auto op = [](std::string* s, RaftOp o, std::initializer_list<uint8_t> args = {}) {
    s->push_back(static_cast<char>(o));
    for (uint8_t a : args) s->push_back(static_cast<char>(a));
  };
  // Member 1 campaigns (pre-vote, then vote), wins, replicates and commits a
  // proposal, serves a read.
  std::string lead;
  lead.push_back(0);
  lead.push_back(0);
  op(&lead, kOpTick, {7});
  op(&lead, kOpReady);
  op(&lead, kOpReply, {0, 1});  // pre-vote granted
  op(&lead, kOpReady);
  op(&lead, kOpReply, {0, 1});  // vote granted
  op(&lead, kOpReady);
  op(&lead, kOpReply, {0, 1});  // append of the no-op accepted
  op(&lead, kOpReady);
  op(&lead, kOpPropose);
  Chunk(&lead, PutCmd("k", "v"));
  op(&lead, kOpReadIndex, {5});
  op(&lead, kOpReady);
  op(&lead, kOpReply, {0, 1});
  op(&lead, kOpReply, {0, 1});
  op(&lead, kOpReady);
  op(&lead, kOpTick, {0});
  op(&lead, kOpReady);
  op(&lead, kOpReply, {0, 0});  // a rejection
  op(&lead, kOpReady);
  Seed("fuzz_raft_step", 1, lead);
  // Member 1 follows leader 2: appends, a conflicting suffix, a vote request.
  std::string follow;
  follow.push_back(static_cast<char>(3 << 3));  // recovered log of 3 entries
  follow.push_back(0);
  // kOpAppend: from, term pick (current + 1), to, prev pick (last), prev_term
  // from own log, 2 entries, commit pick, read round.
  op(&follow, kOpAppend, {0, 4, 1, 0, 1, 2, 25, 17, 0, 1});
  op(&follow, kOpReady);
  op(&follow, kOpAppend, {0, 1, 1, 1, 1, 1, 25, 3, 2});
  op(&follow, kOpReady);
  op(&follow, kOpVote, {1, 4, 2, 4, 1});
  op(&follow, kOpReady);
  op(&follow, kOpRestart);
  op(&follow, kOpReady);
  Seed("fuzz_raft_step", 2, follow);
  // A single voter elects itself and commits alone.
  std::string single;
  single.push_back(static_cast<char>(kSingleVoter));
  single.push_back(0);
  op(&single, kOpTick, {7});
  op(&single, kOpReady);
  op(&single, kOpPropose);
  Chunk(&single, PutCmd("x", "y"));
  op(&single, kOpReady);
  op(&single, kOpReady);
  Seed("fuzz_raft_step", 3, single);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  char templ[] = "/tmp/raftkv-corpus-XXXXXX";
  if (mkdtemp(templ) == nullptr) return 1;
  scratch = templ;
  LogRecoverySeeds();
  HardStateSeeds();
  StateMachineSeeds();
  KvRequestSeeds();
  RaftSeeds();
  fs::remove_all(scratch);
  std::printf("seed corpora written to %s\n", out_dir.c_str());
  return 0;
}
