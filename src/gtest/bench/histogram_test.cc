// Tests of the benchmark's latency histogram (src/bench/histogram.h).
#include "bench/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace raftkv {
namespace bench {
namespace {

constexpr double kMaxRelativeError = 1.0 / Histogram::kSubBuckets;

// The nearest-rank quantile of a sorted sample.
uint64_t TrueQuantile(const std::vector<uint64_t>& sorted, double q) {
  if (q <= 0) return sorted.front();
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(sorted.size()) - 1e-9));
  rank = std::clamp<uint64_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

// The histogram's answer is never below the true value and within the bound above it.
void ExpectQuantileWithinBound(const Histogram& h, const std::vector<uint64_t>& sorted, double q) {
  const uint64_t truth = TrueQuantile(sorted, q);
  const uint64_t got = h.ValueAtQuantile(q);
  EXPECT_GE(got, truth) << "q=" << q;
  EXPECT_LE(static_cast<double>(got), static_cast<double>(truth) * (1 + kMaxRelativeError))
      << "q=" << q << " truth=" << truth;
}

TEST(Histogram, EmptyReportsZeros) {
  Histogram h;
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 0u);
  EXPECT_EQ(h.ValueAtQuantile(0), 0u);
  EXPECT_EQ(h.ValueAtQuantile(1), 0u);
  EXPECT_EQ(h.CountBetween(0, std::numeric_limits<uint64_t>::max()), 0u);
}

TEST(Histogram, SingleValueIsEveryQuantile) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{12345},
                     uint64_t{987654321}, std::numeric_limits<uint64_t>::max()}) {
    Histogram h;
    h.Record(v);
    EXPECT_EQ(h.count(), 1u);
    EXPECT_EQ(h.min(), v);
    EXPECT_EQ(h.max(), v);
    for (double q : {0.0, 0.001, 0.5, 0.9, 0.99, 0.999, 1.0}) {
      EXPECT_EQ(h.ValueAtQuantile(q), v) << "value " << v << " q " << q;
    }
  }
}

TEST(Histogram, SmallValuesAreExact) {
  // 1..100: every value below 2^kSubBucketBits has its own bucket.
  Histogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
  EXPECT_EQ(h.ValueAtPercentile(50), 50u);
  EXPECT_EQ(h.ValueAtPercentile(90), 90u);
  EXPECT_EQ(h.ValueAtPercentile(99), 99u);
  EXPECT_EQ(h.ValueAtPercentile(99.9), 100u);
  EXPECT_EQ(h.ValueAtPercentile(100), 100u);
  EXPECT_EQ(h.ValueAtPercentile(0), 1u);
  EXPECT_EQ(h.ValueAtPercentile(1), 1u);
  EXPECT_EQ(h.ValueAtPercentile(1.5), 2u);
}

TEST(Histogram, UniformMicrosecondsInNanoseconds) {
  // 1..10000 us recorded in ns: p50 = 5000 us, p99 = 9900 us, within 0.79%.
  Histogram h;
  std::vector<uint64_t> values;
  for (uint64_t us = 1; us <= 10000; ++us) values.push_back(us * 1000);
  for (uint64_t v : values) h.Record(v);
  for (double q : {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999}) {
    ExpectQuantileWithinBound(h, values, q);
  }
  EXPECT_EQ(h.ValueAtQuantile(1), 10000u * 1000);
  EXPECT_EQ(h.max(), 10000u * 1000);
  EXPECT_EQ(h.min(), 1000u);
  EXPECT_DOUBLE_EQ(h.mean(), 5000.5 * 1000);
}

TEST(Histogram, RandomLogNormalWithinRelativeErrorBound) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(2e6), 1.0);  // around 2 ms in ns
  std::vector<uint64_t> values;
  Histogram h;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.Record(v);
  }
  std::sort(values.begin(), values.end());
  for (double q = 0.0005; q < 1; q += 0.0173) ExpectQuantileWithinBound(h, values, q);
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999}) ExpectQuantileWithinBound(h, values, q);
  EXPECT_EQ(h.max(), values.back());
  EXPECT_EQ(h.min(), values.front());
  EXPECT_EQ(h.ValueAtQuantile(1), values.back());
}

TEST(Histogram, MaxIsExactEvenInAWideBucket) {
  Histogram h;
  h.Record(1000);
  h.Record(1000003);  // a bucket about 8192 wide
  EXPECT_EQ(h.max(), 1000003u);
  EXPECT_EQ(h.ValueAtQuantile(1), 1000003u);
  EXPECT_EQ(h.ValueAtQuantile(0.99), 1000003u);  // clamped to max, not the bucket's end
  EXPECT_GE(h.ValueAtQuantile(0.5), 1000u);  // the end of 1000's bucket, [1000, 1003]
  EXPECT_LE(h.ValueAtQuantile(0.5), 1003u);
  EXPECT_EQ(h.ValueAtQuantile(0), 1000u);  // min is exact
}

TEST(Histogram, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> dist(1, 50'000'000);
  Histogram all, parts[4];
  for (int i = 0; i < 40000; ++i) {
    const uint64_t v = dist(rng);
    all.Record(v);
    parts[i % 4].Record(v);
  }
  Histogram merged;
  for (const Histogram& p : parts) merged.Merge(p);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_DOUBLE_EQ(merged.mean(), all.mean());
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    EXPECT_EQ(merged.ValueAtQuantile(q), all.ValueAtQuantile(q)) << q;
  }
}

TEST(Histogram, MergeWithEmptyOnEitherSide) {
  Histogram a, empty;
  a.Record(500);
  a.Record(70);
  a.Merge(empty);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(a.min(), 70u);
  Histogram b;
  b.Merge(a);
  EXPECT_EQ(b.count(), 2u);
  EXPECT_EQ(b.min(), 70u);
  EXPECT_EQ(b.max(), 500u);
}

TEST(Histogram, RecordNAndReset) {
  Histogram h;
  h.RecordN(10, 99);
  h.RecordN(1000, 1);
  h.RecordN(5, 0);  // no-op
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), 10u);
  EXPECT_EQ(h.ValueAtPercentile(99), 10u);
  EXPECT_EQ(h.ValueAtPercentile(99.5), 1000u);
  EXPECT_DOUBLE_EQ(h.mean(), (990.0 + 1000.0) / 100);
  h.Reset();
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.max(), 0u);
  h.Record(3);
  EXPECT_EQ(h.min(), 3u);
}

TEST(Histogram, BucketsTileTheRangeWithBoundedWidth) {
  uint64_t expected_low = 0;
  for (size_t i = 0; i < Histogram::kNumBuckets; ++i) {
    const uint64_t low = Histogram::BucketLow(i);
    const uint64_t high = Histogram::BucketHigh(i);
    ASSERT_EQ(low, expected_low) << "bucket " << i;
    ASSERT_LE(low, high);
    ASSERT_EQ(Histogram::BucketIndex(low), i);
    ASSERT_EQ(Histogram::BucketIndex(high), i);
    if (low >= Histogram::kSubBuckets) {
      ASSERT_LE(static_cast<double>(high - low + 1), static_cast<double>(low) * kMaxRelativeError);
    }
    if (i + 1 < Histogram::kNumBuckets) {
      expected_low = high + 1;
    } else {
      EXPECT_EQ(high, std::numeric_limits<uint64_t>::max());
    }
  }
}

TEST(Histogram, CountBetween) {
  Histogram h;
  for (uint64_t v = 0; v < 100; ++v) h.Record(v);
  h.RecordN(1'000'000, 5);
  EXPECT_EQ(h.CountBetween(0, 100), 100u);
  EXPECT_EQ(h.CountBetween(10, 20), 10u);
  EXPECT_EQ(h.CountBetween(20, 10), 0u);
  EXPECT_EQ(h.CountBetween(100, 2'000'000), 5u);
  EXPECT_EQ(h.CountBetween(0, std::numeric_limits<uint64_t>::max()), 105u);
}

}  // namespace
}  // namespace bench
}  // namespace raftkv
