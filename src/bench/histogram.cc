#include "bench/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace raftkv {
namespace bench {

namespace {

// Position of the highest set bit of v (v != 0).
int HighestBit(uint64_t v) { return 63 - __builtin_clzll(v); }

}  // namespace

Histogram::Histogram() : counts_(kNumBuckets, 0) {}

size_t Histogram::BucketIndex(uint64_t value) {
  if (value < kSubBuckets) return static_cast<size_t>(value);
  // value in [2^m, 2^(m+1)) with m >= kSubBucketBits: keep the top
  // kSubBucketBits+1 bits. mantissa is in [kSubBuckets, 2*kSubBuckets).
  const int shift = HighestBit(value) - kSubBucketBits;
  const uint64_t mantissa = value >> shift;
  return static_cast<size_t>((static_cast<uint64_t>(shift) + 1) * kSubBuckets +
                             (mantissa - kSubBuckets));
}

uint64_t Histogram::BucketLow(size_t index) {
  if (index < kSubBuckets) return index;
  const uint64_t shift = index / kSubBuckets - 1;
  const uint64_t mantissa = kSubBuckets + index % kSubBuckets;
  return mantissa << shift;
}

uint64_t Histogram::BucketHigh(size_t index) {
  if (index < kSubBuckets) return index;
  const uint64_t shift = index / kSubBuckets - 1;
  const uint64_t low = BucketLow(index);
  return low + ((uint64_t{1} << shift) - 1);
}

void Histogram::RecordN(uint64_t value, uint64_t n) {
  if (n == 0) return;
  counts_[BucketIndex(value)] += n;
  if (count_ == 0 || value < min_) min_ = value;
  if (value > max_) max_ = value;
  count_ += n;
  sum_ += static_cast<long double>(value) * static_cast<long double>(n);
}

void Histogram::Merge(const Histogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < kNumBuckets; ++i) counts_[i] += other.counts_[i];
  if (count_ == 0 || other.min_ < min_) min_ = other.min_;
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void Histogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = min_ = max_ = 0;
  sum_ = 0;
}

double Histogram::mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / static_cast<long double>(count_));
}

uint64_t Histogram::ValueAtQuantile(double q) const {
  if (count_ == 0) return 0;
  if (!(q > 0)) return min_;  // also NaN
  if (q >= 1) return max_;
  // Nearest rank; the epsilon keeps e.g. 0.99 * 100 (= 98.999...) at rank 99.
  double r = std::ceil(q * static_cast<double>(count_) - 1e-9);
  uint64_t rank = r < 1 ? 1 : static_cast<uint64_t>(r);
  if (rank > count_) rank = count_;
  uint64_t seen = 0;
  for (size_t i = 0; i < kNumBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(BucketHigh(i), min_, max_);
  }
  return max_;
}

uint64_t Histogram::CountBetween(uint64_t lo, uint64_t hi) const {
  if (count_ == 0 || lo >= hi) return 0;
  uint64_t total = 0;
  for (size_t i = BucketIndex(lo); i < kNumBuckets; ++i) {
    const uint64_t low = BucketLow(i);
    if (low >= hi) break;
    if (low >= lo) total += counts_[i];
  }
  return total;
}

}  // namespace bench
}  // namespace raftkv
