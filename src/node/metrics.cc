#include "node/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <glog/logging.h>

namespace raftkv {

// ---------------------------------------------------------------------------
// Histogram
// ---------------------------------------------------------------------------

Histogram::Histogram(std::vector<uint64_t> bounds, double divisor)
    : bounds_(std::move(bounds)),
      divisor_(divisor),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end()) &&
        std::adjacent_find(bounds_.begin(), bounds_.end()) == bounds_.end())
      << "histogram bounds must be strictly ascending";
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(uint64_t value) {
  // Buckets are inclusive upper bounds (Prometheus "le"): the first bound >= value.
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.bounds.reserve(bounds_.size());
  for (uint64_t b : bounds_) s.bounds.push_back(static_cast<double>(b) / divisor_);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = static_cast<double>(sum_.load(std::memory_order_relaxed)) / divisor_;
  return s;
}

std::vector<uint64_t> FsyncBucketsNanos() {
  constexpr uint64_t kUs = 1000, kMs = 1000 * kUs;
  return {50 * kUs,  100 * kUs, 250 * kUs, 500 * kUs, 1 * kMs,   2500 * kUs, 5 * kMs,
          10 * kMs,  25 * kMs,  50 * kMs,  100 * kMs, 250 * kMs, 500 * kMs,  1000 * kMs};
}

std::vector<uint64_t> BatchSizeBuckets() {
  std::vector<uint64_t> b;
  for (uint64_t n = 1; n <= 4096; n *= 2) b.push_back(n);
  return b;
}

// ---------------------------------------------------------------------------
// NodeMetrics
// ---------------------------------------------------------------------------

NodeMetrics::NodeMetrics()
    : fsync_seconds(FsyncBucketsNanos(), 1e9),
      append_entries_sent(BatchSizeBuckets(), 1),
      append_entries_received(BatchSizeBuckets(), 1) {}

void NodeMetrics::OnSync(std::chrono::nanoseconds elapsed) {
  fsync_seconds.Observe(static_cast<uint64_t>(std::max<int64_t>(0, elapsed.count())));
}

// ---------------------------------------------------------------------------
// RateWindow
// ---------------------------------------------------------------------------

void RateWindow::Sample(std::chrono::steady_clock::time_point now, uint64_t value) {
  samples_.emplace_back(now, value);
  // Keep one sample at or beyond the window's start, so the rate covers the
  // whole window once it has filled.
  while (samples_.size() > 2 && now - samples_[1].first >= window_) samples_.pop_front();
}

double RateWindow::PerSecond() const {
  if (samples_.size() < 2) return 0;
  const auto& [t0, v0] = samples_.front();
  const auto& [t1, v1] = samples_.back();
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  if (seconds <= 0 || v1 < v0) return 0;
  return static_cast<double>(v1 - v0) / seconds;
}

// ---------------------------------------------------------------------------
// ExpositionWriter
// ---------------------------------------------------------------------------

namespace {

// Backslash and newline escaped, and the double quote too if `quote`: the
// exposition format's rules for label values (quoted) and HELP text.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string ExpositionWriter::EscapeLabelValue(const std::string& value) {
  return Escape(value, /*quote=*/true);
}

std::string ExpositionWriter::EscapeHelp(const std::string& help) {
  return Escape(help, /*quote=*/false);
}

std::string ExpositionWriter::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (value == std::floor(value) && std::fabs(value) <= 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    return buf;
  }
  // The shortest spelling that reads back as the same double.
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

void ExpositionWriter::Family(const std::string& name, const std::string& type,
                              const std::string& help) {
  out_ += "# HELP " + name + " " + EscapeHelp(help) + "\n";
  out_ += "# TYPE " + name + " " + type + "\n";
}

void ExpositionWriter::Sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void ExpositionWriter::HistogramSamples(const std::string& name, const Labels& labels,
                                        const Histogram::Snapshot& h) {
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i < h.cumulative.size(); ++i) {
    with_le.back().second = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
    Sample(name + "_bucket", with_le, static_cast<double>(h.cumulative[i]));
  }
  Sample(name + "_sum", labels, h.sum);
  Sample(name + "_count", labels, static_cast<double>(h.count));
}

}  // namespace raftkv
