// Histogram: an HDR-style log-linear histogram of non-negative integers
// (the benchmark records request latencies in nanoseconds).
//
// Buckets: every value below 2^kSubBucketBits has its own bucket (exact);
// above, each power-of-two range [2^m, 2^(m+1)) is split into 2^kSubBucketBits
// equal sub-buckets. A bucket's width is therefore at most 1/2^kSubBucketBits
// (= 1/128, 0.79%) of its lowest value: every quantile is reported with a
// relative error below 0.79%, over the whole uint64 range, in a fixed 58 KiB.
//
// count, min, max and the sum (so the mean) are exact. Histograms merge by
// adding counts, so each thread records into its own and the results are
// merged at the end (a Histogram is not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace raftkv {
namespace bench {

class Histogram {
 public:
  static constexpr int kSubBucketBits = 7;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
  // Number of buckets needed to cover the whole uint64 range.
  static constexpr size_t kNumBuckets =
      static_cast<size_t>((64 - kSubBucketBits + 1) * kSubBuckets);

  Histogram();

  void Record(uint64_t value) { RecordN(value, 1); }
  void RecordN(uint64_t value, uint64_t n);
  // Adds every value recorded in `other` to this histogram.
  void Merge(const Histogram& other);
  void Reset();

  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Exact smallest / largest recorded value; 0 when empty.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  // Exact arithmetic mean (sum / count); 0 when empty.
  double mean() const;
  // Exact sum of the recorded values (long double: no overflow in practice).
  long double sum() const { return sum_; }

  // The value at quantile q (0 <= q <= 1) by the nearest-rank definition: the
  // rank-th smallest recorded value with rank = max(1, ceil(q * count)).
  // Reported as the highest value of that value's bucket, clamped to
  // [min(), max()]: never below the true value, and above it by less than
  // 1/kSubBuckets of it. q <= 0 gives min(), q >= 1 gives max() (both exact).
  // 0 when empty.
  uint64_t ValueAtQuantile(double q) const;
  // Same as ValueAtQuantile(percentile / 100).
  uint64_t ValueAtPercentile(double percentile) const {
    return ValueAtQuantile(percentile / 100.0);
  }

  // How many recorded values fall in [lo, hi), at bucket resolution: a bucket
  // counts if its lowest value is in the range.
  uint64_t CountBetween(uint64_t lo, uint64_t hi) const;

  // The bucket holding `value`, and the value range [BucketLow, BucketHigh]
  // (inclusive) of bucket `index`.
  static size_t BucketIndex(uint64_t value);
  static uint64_t BucketLow(size_t index);
  static uint64_t BucketHigh(size_t index);

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  long double sum_ = 0;
};

}  // namespace bench
}  // namespace raftkv
