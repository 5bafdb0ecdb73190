#include "bench/report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <sstream>

namespace raftkv {
namespace bench {

namespace {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

double NsToUs(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// A latency in microseconds for humans: "850", "12.5", "1,234" -> plain.
std::string Us(double us) {
  if (us < 10) return Printf("%.1f", us);
  return Printf("%.0f", us);
}

// A duration in microseconds with a unit: "850 us", "12.3 ms", "1.20 s".
std::string Duration(double us) {
  if (us < 1000) return Us(us) + " us";
  if (us < 1e6) return Printf("%.*f ms", us < 1e4 ? 2 : 1, us / 1000);
  return Printf("%.2f s", us / 1e6);
}

std::string CodesText(const std::map<std::string, uint64_t>& by_code) {
  std::string out;
  for (const auto& [name, n] : by_code) {
    if (!out.empty()) out += ", ";
    out += name + ": " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

std::string JsonNumber(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  return Printf("%.*f", decimals, v);
}

std::string JsonCodes(const std::map<std::string, uint64_t>& by_code) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, n] : by_code) {
    if (!first) out += ", ";
    first = false;
    out += JsonString(name) + ": " + std::to_string(n);
  }
  return out + "}";
}

// Histogram display bounds in ns: {1, 1.5, 2, 3, 5, 7} x 10^k.
std::vector<uint64_t> DisplayBounds() {
  static const double kSteps[] = {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8};
  std::vector<uint64_t> bounds;
  double decade = 1;
  for (int e = 0; e <= 18; ++e, decade *= 10) {
    for (double s : kSteps) {
      const double b = s * decade;
      if (b >= 1.8e19) break;
      const uint64_t v = static_cast<uint64_t>(std::llround(b));
      if (bounds.empty() || v > bounds.back()) bounds.push_back(v);
    }
  }
  return bounds;
}

}  // namespace

LatencySummary Summarize(const Histogram& h) {
  LatencySummary s;
  if (h.empty()) return s;
  s.avg = h.mean() / 1000.0;
  s.p50 = NsToUs(h.ValueAtPercentile(50));
  s.p90 = NsToUs(h.ValueAtPercentile(90));
  s.p99 = NsToUs(h.ValueAtPercentile(99));
  s.p999 = NsToUs(h.ValueAtPercentile(99.9));
  s.min = NsToUs(h.min());
  s.max = NsToUs(h.max());
  return s;
}

void ComputeRates(ScenarioReport* r) {
  r->ops_per_sec = r->seconds > 0 ? static_cast<double>(r->acknowledged) / r->seconds : 0;
  r->mb_per_sec = r->ops_per_sec * static_cast<double>(r->key_len + r->value_len) / 1e6;
}

std::string FormatHistogram(const Histogram& h, int bar_width) {
  if (h.empty()) return "latency histogram: no successful requests\n";
  const std::vector<uint64_t> bounds = DisplayBounds();
  auto slot = [&](uint64_t v) {
    // Index i with bounds[i] <= v < bounds[i+1] (v below bounds[0] -> 0).
    auto it = std::upper_bound(bounds.begin(), bounds.end(), v);
    return it == bounds.begin() ? size_t{0} : static_cast<size_t>(it - bounds.begin()) - 1;
  };
  const size_t first = slot(h.min());
  const size_t last = slot(h.max());
  std::vector<uint64_t> counts;
  for (size_t i = first; i <= last; ++i) {
    const uint64_t lo = i == first ? 0 : bounds[i];
    const uint64_t hi = (i == last || i + 1 >= bounds.size()) ? std::numeric_limits<uint64_t>::max()
                                                              : bounds[i + 1];
    counts.push_back(h.CountBetween(lo, hi));
  }
  const uint64_t peak = *std::max_element(counts.begin(), counts.end());
  std::string out =
      Printf("latency histogram (us; %" PRIu64 " successful requests, min %s, max %s):\n",
             h.count(), Us(NsToUs(h.min())).c_str(), Us(NsToUs(h.max())).c_str());
  uint64_t cumulative = 0;
  for (size_t i = first; i <= last; ++i) {
    const uint64_t n = counts[i - first];
    cumulative += n;
    const std::string lo = Us(NsToUs(bounds[i]));
    const std::string hi = i + 1 < bounds.size() ? Us(NsToUs(bounds[i + 1])) : "inf";
    int bars = peak == 0 ? 0
                         : static_cast<int>(std::llround(static_cast<double>(n) * bar_width /
                                                         static_cast<double>(peak)));
    std::string bar(static_cast<size_t>(bars), '#');
    if (bars == 0 && n > 0) bar = ".";
    out += Printf("  [%8s, %8s)  %9" PRIu64 "  %5.1f%%  %6.2f%%  %s\n", lo.c_str(), hi.c_str(), n,
                  100.0 * static_cast<double>(n) / static_cast<double>(h.count()),
                  100.0 * static_cast<double>(cumulative) / static_cast<double>(h.count()),
                  bar.c_str());
  }
  return out;
}

std::string FailureLine(const ScenarioReport& r) {
  if (r.passed()) return "";
  std::string line = "FAILED: Benchmark." + r.scenario + ": ";
  if (!r.setup_error.empty()) return line + "could not run: " + r.setup_error;
  line += Printf("%" PRIu64 " of %" PRIu64 " requests failed (%s", r.failed, r.requests,
                 CodesText(r.failed_by_status).c_str());
  if (r.wrong_answer > 0) line += Printf(", wrong answer: %" PRIu64, r.wrong_answer);
  line += ")";
  const Verification& v = r.verified;
  if (!v.passed()) {
    line += Printf("; verification: %" PRIu64 " of %" PRIu64
                   " checked not as expected (missing %" PRIu64 ", wrong value %" PRIu64
                   ", read errors %" PRIu64 " [%s])",
                   v.checked - v.ok, v.checked, v.missing, v.wrong, v.errors,
                   CodesText(v.errors_by_status).c_str());
  }
  return line;
}

std::string FormatReport(const ScenarioReport& r) {
  std::ostringstream out;
  const std::string rule(78, '=');
  out << rule << "\n";
  out << "Benchmark." << r.scenario << ": " << r.requests << " " << r.operation << " requests, key "
      << r.key_len << " B + value " << r.value_len << " B\n";
  out << "cluster    " << r.cluster << ", leader " << (r.target.empty() ? "?" : r.target) << " + "
      << r.followers << " follower" << (r.followers == 1 ? "" : "s");
  if (!r.via.empty()) out << ", load sent to follower " << r.via << " (forwarded)";
  if (!r.server_flags.empty()) out << ", server flags: " << r.server_flags;
  out << "\n";
  out << "client     async gRPC, " << r.conns << " connection" << (r.conns == 1 ? "" : "s") << ", "
      << r.client_cq_num << " CQ x " << r.client_threads_per_cq << " threads, " << r.inflight
      << " in flight, deadline " << r.timeout_ms << " ms\n";
  if (!r.setup_error.empty()) {
    out << FailureLine(r) << "\n" << rule << "\n";
    return out.str();
  }
  if (r.ops_per_call > 1) {
    out << Printf("batches    %" PRIu64 " calls of up to %d writes (each call one log entry); "
                  "latency below is per call\n",
                  r.calls, r.ops_per_call);
  }
  out << Printf("requests   %" PRIu64 "\n", r.requests);
  out << Printf("acked      %" PRIu64 "\n", r.acknowledged);
  out << Printf("failed     %" PRIu64 " (%s%s)\n", r.failed, CodesText(r.failed_by_status).c_str(),
                r.wrong_answer ? Printf(", wrong answer: %" PRIu64, r.wrong_answer).c_str() : "");
  out << Printf("elapsed    %.3f s\n", r.seconds);
  out << Printf("throughput %.0f ops/s, %.2f MB/s (key + value bytes)\n", r.ops_per_sec,
                r.mb_per_sec);
  if (!r.items_name.empty()) {
    out << Printf("%-10s %" PRIu64 " %s, %.0f %s/s", r.items_name.c_str(), r.items,
                  r.items_name.c_str(), r.items_per_sec, r.items_name.c_str());
    if (r.watchers > 0) out << Printf(" (to %d watchers, from the first write sent)", r.watchers);
    if (r.range_limit > 0) {
      out << Printf(" (up to %d per call out of %" PRIu64 " keys)", r.range_limit, r.range_keys);
    }
    out << "\n";
  }
  if (!r.delivery_ns.empty()) {
    const LatencySummary d = Summarize(r.delivery_ns);
    out << "delivery   Put sent -> event received: avg " << Duration(d.avg) << ", p50 "
        << Duration(d.p50) << ", p90 " << Duration(d.p90) << ", p99 " << Duration(d.p99)
        << ", max " << Duration(d.max) << "\n";
  }
  const LatencySummary s = Summarize(r.latency_ns);
  out << "latency    avg " << Duration(s.avg) << ", p50 " << Duration(s.p50) << ", p90 "
      << Duration(s.p90) << ", p99 " << Duration(s.p99) << ", p99.9 " << Duration(s.p999)
      << ", max " << Duration(s.max) << "\n";
  if (r.cpu.client >= 0 && r.seconds > 0) {
    out << Printf("cpu        client %.2f s", r.cpu.client);
    double total = r.cpu.client;
    if (r.cpu.leader >= 0) {
      out << Printf(", leader %.2f s, followers %.2f s", r.cpu.leader, r.cpu.followers);
      total += r.cpu.leader + r.cpu.followers;
    }
    out << Printf(" in %.3f s: %.2f cores busy on average\n", r.seconds, total / r.seconds);
  }
  if (r.cpu.leader_switches >= 0 && r.acknowledged > 0) {
    const double n = static_cast<double>(r.acknowledged);
    out << Printf("wake-ups   per request: leader %.1f", r.cpu.leader_switches / n);
    if (r.cpu.followers_switches >= 0 && r.followers > 0) {
      out << Printf(", each follower %.1f", r.cpu.followers_switches / n / r.followers);
    }
    out << " (voluntary context switches of the servers' threads)\n";
  }
  out << FormatHistogram(r.latency_ns);
  const Verification& v = r.verified;
  if (v.mode == "all" || v.mode == "sample") {
    out << Printf("verified   %s: %" PRIu64 " of %" PRIu64
                  " acknowledged writes read back (linearizable Get): %" PRIu64
                  " with the written value, %" PRIu64 " missing, %" PRIu64 " wrong, %" PRIu64
                  " read errors\n",
                  v.mode == "all" ? "all" : "random sample", v.checked, v.population, v.ok,
                  v.missing, v.wrong, v.errors);
  } else if (v.mode == "every watcher") {
    out << Printf("verified   every watcher: %" PRIu64 " of %" PRIu64
                  " (acknowledged write, watcher) pairs seen once, in revision order, with the "
                  "written value: %" PRIu64 " missing, %" PRIu64
                  " duplicated/out of order/wrong, %" PRIu64 " stream errors\n",
                  v.ok, v.checked, v.missing, v.wrong, v.errors);
  } else if (v.mode != "none") {
    out << Printf("verified   %s: %" PRIu64 " of %" PRIu64 " answers as expected\n", v.mode.c_str(),
                  v.ok, v.checked);
  }
  if (r.floor.measured()) {
    out << Printf("floor: write_p50_us=%.0f echo_rtt_p50_us=%.0f fsync_p50_us=%.0f ratio=%.2f\n",
                  r.floor.write_p50_us, r.floor.echo_rtt_p50_us, r.floor.fsync_p50_us, r.floor.ratio);
  } else if (!r.floor.error.empty()) {
    out << "floor: not measured: " << r.floor.error << "\n";
  }
  if (!r.passed()) out << FailureLine(r) << "\n";
  out << rule << "\n";
  return out.str();
}

std::string FormatSummaryTable(const std::vector<ScenarioReport>& reports) {
  std::ostringstream out;
  out << Printf("%-16s %6s %4s %5s %8s %8s %7s %7s %9s %7s %8s %8s %8s %8s %8s %8s %5s  %s\n",
                "scenario", "value", "foll", "conns", "inflight", "requests", "acked", "failed",
                "ops/s", "MB/s", "avg_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
                "floor", "check");
  for (const ScenarioReport& r : reports) {
    const LatencySummary s = Summarize(r.latency_ns);
    std::string check = r.passed() ? "ok" : "FAILED";
    if (r.passed() && r.verified.mode == "sample") check = "ok (sample)";
    if (!r.items_name.empty()) check += Printf("  %.0f %s/s", r.items_per_sec, r.items_name.c_str());
    // write_p50 over its physical floor (Write with one in flight), or "-".
    const std::string floor = r.floor.measured() ? Printf("%.2f", r.floor.ratio) : "-";
    out << Printf("%-16s %6d %4d %5d %8d %8" PRIu64 " %7" PRIu64 " %7" PRIu64
                  " %9.0f %7.2f %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %5s  %s\n",
                  ("Benchmark." + r.scenario).c_str(), r.value_len, r.followers, r.conns,
                  r.inflight, r.requests, r.acknowledged, r.failed, r.ops_per_sec, r.mb_per_sec,
                  s.avg, s.p50, s.p90, s.p99, s.p999, s.max, floor.c_str(), check.c_str());
  }
  return out.str();
}


std::string ToJson(const ScenarioReport& r) {
  const LatencySummary s = Summarize(r.latency_ns);
  const Verification& v = r.verified;
  std::ostringstream o;
  o << "{";
  o << "\"scenario\": " << JsonString(r.scenario);
  o << ", \"operation\": " << JsonString(r.operation);
  o << ", \"passed\": " << (r.passed() ? "true" : "false");
  o << ", \"requests\": " << r.requests;
  o << ", \"acknowledged\": " << r.acknowledged;
  o << ", \"failed\": " << r.failed;
  o << ", \"failed_by_status\": " << JsonCodes(r.failed_by_status);
  o << ", \"wrong_answer\": " << r.wrong_answer;
  o << ", \"seconds\": " << JsonNumber(r.seconds, 6);
  o << ", \"ops_per_sec\": " << JsonNumber(r.ops_per_sec, 1);
  o << ", \"mb_per_sec\": " << JsonNumber(r.mb_per_sec, 4);
  o << ", \"latency_us\": {\"avg\": " << JsonNumber(s.avg, 1)
    << ", \"p50\": " << JsonNumber(s.p50, 1) << ", \"p90\": " << JsonNumber(s.p90, 1)
    << ", \"p99\": " << JsonNumber(s.p99, 1)
    << ", \"p999\": " << JsonNumber(s.p999, 1) << ", \"min\": " << JsonNumber(s.min, 1)
    << ", \"max\": " << JsonNumber(s.max, 1) << "}";
  if (!r.items_name.empty()) {
    o << ", \"items_name\": " << JsonString(r.items_name) << ", \"items\": " << r.items
      << ", \"items_per_sec\": " << JsonNumber(r.items_per_sec, 1);
  }
  if (r.range_limit > 0) {
    o << ", \"range_limit\": " << r.range_limit << ", \"range_keys\": " << r.range_keys;
  }
  if (r.watchers > 0) o << ", \"watchers\": " << r.watchers;
  if (r.floor.measured()) {
    o << ", \"floor\": {\"write_p50_us\": " << JsonNumber(r.floor.write_p50_us, 1)
      << ", \"echo_rtt_p50_us\": " << JsonNumber(r.floor.echo_rtt_p50_us, 1)
      << ", \"fsync_p50_us\": " << JsonNumber(r.floor.fsync_p50_us, 1)
      << ", \"ratio\": " << JsonNumber(r.floor.ratio, 3) << "}";
  }
  if (!r.delivery_ns.empty()) {
    const LatencySummary d = Summarize(r.delivery_ns);
    o << ", \"delivery_latency_us\": {\"avg\": " << JsonNumber(d.avg, 1)
      << ", \"p50\": " << JsonNumber(d.p50, 1) << ", \"p90\": " << JsonNumber(d.p90, 1)
      << ", \"p99\": " << JsonNumber(d.p99, 1) << ", \"max\": " << JsonNumber(d.max, 1) << "}";
  }
  o << ", \"cpu_seconds\": {\"client\": " << JsonNumber(r.cpu.client, 3)
    << ", \"leader\": " << (r.cpu.leader < 0 ? "null" : JsonNumber(r.cpu.leader, 3))
    << ", \"followers\": " << (r.cpu.followers < 0 ? "null" : JsonNumber(r.cpu.followers, 3))
    << "}";
  auto count = [](double v) { return v < 0 ? std::string("null") : JsonNumber(v, 0); };
  o << ", \"context_switches\": {\"leader\": " << count(r.cpu.leader_switches)
    << ", \"followers\": " << count(r.cpu.followers_switches) << "}";
  o << ", \"value_len\": " << r.value_len;
  o << ", \"key_len\": " << r.key_len;
  o << ", \"followers\": " << r.followers;
  o << ", \"conns\": " << r.conns;
  o << ", \"inflight\": " << r.inflight;
  o << ", \"client_cq_num\": " << r.client_cq_num;
  o << ", \"client_threads_per_cq\": " << r.client_threads_per_cq;
  o << ", \"timeout_ms\": " << r.timeout_ms;
  o << ", \"ops_per_call\": " << r.ops_per_call;
  o << ", \"calls\": " << r.calls;
  o << ", \"cluster\": " << JsonString(r.cluster);
  o << ", \"target\": " << JsonString(r.target);
  o << ", \"via_follower\": " << JsonString(r.via);
  o << ", \"server_flags\": " << JsonString(r.server_flags);
  o << ", \"seed\": " << r.seed;
  o << ", \"verified\": {\"mode\": " << JsonString(v.mode) << ", \"population\": " << v.population
    << ", \"checked\": " << v.checked << ", \"ok\": " << v.ok << ", \"missing\": " << v.missing
    << ", \"wrong\": " << v.wrong << ", \"errors\": " << v.errors
    << ", \"errors_by_status\": " << JsonCodes(v.errors_by_status)
    << ", \"passed\": " << (v.passed() ? "true" : "false") << "}";
  if (!r.setup_error.empty()) o << ", \"error\": " << JsonString(r.setup_error);
  o << "}";
  return o.str();
}

std::string ToJsonArray(const std::vector<ScenarioReport>& reports) {
  std::string out = "[\n";
  for (size_t i = 0; i < reports.size(); ++i) {
    out += "  " + ToJson(reports[i]) + (i + 1 < reports.size() ? ",\n" : "\n");
  }
  return out + "]\n";
}

}  // namespace bench
}  // namespace raftkv
