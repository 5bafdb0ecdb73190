#include "storage/position_name.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace raftkv {
namespace {

TEST(PositionNameTest, FormatsZeroPaddedNamesThatParseBack) {
  const std::string name = position_name::Format("snap-", 42, 7, ".snap");
  EXPECT_EQ(name, "snap-00000000000000000042-00000000000000000007.snap");
  uint64_t index = 0;
  uint64_t term = 0;
  ASSERT_TRUE(position_name::Parse(name, "snap-", ".snap", &index, &term));
  EXPECT_EQ(index, 42u);
  EXPECT_EQ(term, 7u);
  const std::string largest = position_name::Format("ckpt-", UINT64_MAX, UINT64_MAX);
  ASSERT_TRUE(position_name::Parse(largest, "ckpt-", "", &index, &term));
  EXPECT_EQ(index, UINT64_MAX);
  EXPECT_EQ(term, UINT64_MAX);
}

TEST(PositionNameTest, RefusesEveryOtherName) {
  uint64_t index = 5;
  uint64_t term = 6;
  const std::string good = position_name::Format("ckpt-", 1, 2);
  EXPECT_FALSE(position_name::Parse(good + ".tmp", "ckpt-", "", &index, &term));
  EXPECT_FALSE(position_name::Parse(good, "snap-", "", &index, &term));
  EXPECT_FALSE(position_name::Parse(good, "ckpt-", ".snap", &index, &term));
  EXPECT_FALSE(position_name::Parse(good.substr(1), "ckpt-", "", &index, &term));
  std::string dash = good;
  dash[5 + position_name::kDigits] = '_';
  EXPECT_FALSE(position_name::Parse(dash, "ckpt-", "", &index, &term));
  std::string letter = good;
  letter[6] = 'x';
  EXPECT_FALSE(position_name::Parse(letter, "ckpt-", "", &index, &term));
  // 20 digits above 2^64 - 1.
  EXPECT_FALSE(position_name::Parse("ckpt-99999999999999999999-00000000000000000001", "ckpt-", "", &index,
                                    &term));
  EXPECT_EQ(index, 5u) << "a refused name leaves the outputs alone";
  EXPECT_EQ(term, 6u);
}

TEST(PositionNameTest, TableFilesAreRocksDbsSstFiles) {
  EXPECT_TRUE(position_name::IsTableFile("000012.sst"));
  EXPECT_FALSE(position_name::IsTableFile("MANIFEST-000005"));
  EXPECT_FALSE(position_name::IsTableFile("sst"));
  EXPECT_TRUE(position_name::EndsWith("a.tmp", ".tmp"));
  EXPECT_FALSE(position_name::EndsWith("tmp", ".tmp"));
}

}  // namespace
}  // namespace raftkv
