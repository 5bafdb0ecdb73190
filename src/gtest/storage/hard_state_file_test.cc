#include "storage/hard_state_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gtest/common/temp_dir.h"

namespace raftkv {
namespace {

using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

TEST(HardStateTest, MissingFileIsZero) {
  TempDir dir;
  HardStateFile file(dir.Join("hard_state"));
  HardState state{7, 3};
  ASSERT_TRUE(file.Load(&state).ok());
  EXPECT_EQ(state, (HardState{0, 0}));
}

TEST(HardStateTest, SaveLoadRoundTrip) {
  TempDir dir;
  const std::string path = dir.Join("hard_state");
  {
    HardStateFile file(path);
    ASSERT_TRUE(file.Save(HardState{5, 2}).ok());
    ASSERT_TRUE(file.Save(HardState{0xFFFFFFFFFFFFFFFFull, 0x0102030405060708ull}).ok());
  }
  HardStateFile reopened(path);
  HardState state;
  Status s = reopened.Load(&state);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(state, (HardState{0xFFFFFFFFFFFFFFFFull, 0x0102030405060708ull}));
  EXPECT_EQ(ReadFileBytes(path).size(), 28u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(HardStateTest, StaleTempFileIsIgnored) {
  TempDir dir;
  const std::string path = dir.Join("hard_state");
  HardStateFile file(path);
  ASSERT_TRUE(file.Save(HardState{9, 1}).ok());
  WriteFileBytes(path + ".tmp", "garbage from a crashed save");
  HardState state;
  ASSERT_TRUE(file.Load(&state).ok());
  EXPECT_EQ(state, (HardState{9, 1}));
  ASSERT_TRUE(file.Save(HardState{10, 0}).ok());
  ASSERT_TRUE(file.Load(&state).ok());
  EXPECT_EQ(state, (HardState{10, 0}));
}

class HardStateCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(HardStateFile(path_).Save(HardState{4, 2}).ok());
    bytes_ = ReadFileBytes(path_);
    ASSERT_EQ(bytes_.size(), 28u);
  }
  void ExpectCorruption() {
    HardState state;
    Status s = HardStateFile(path_).Load(&state);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  }
  TempDir dir_;
  std::string path_ = dir_.Join("hard_state");
  std::string bytes_;
};

TEST_F(HardStateCorruptionTest, FlippedBitInEveryByte) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    std::string damaged = bytes_;
    damaged[i] ^= 0x10;
    WriteFileBytes(path_, damaged);
    SCOPED_TRACE("byte " + std::to_string(i));
    ExpectCorruption();
  }
}

TEST_F(HardStateCorruptionTest, WrongSize) {
  WriteFileBytes(path_, bytes_.substr(0, 27));
  ExpectCorruption();
  WriteFileBytes(path_, "");
  ExpectCorruption();
  WriteFileBytes(path_, bytes_ + "x");
  ExpectCorruption();
}

TEST_F(HardStateCorruptionTest, BadMagic) {
  std::string damaged = bytes_;
  damaged.replace(0, 4, "XXXX");
  WriteFileBytes(path_, damaged);
  ExpectCorruption();
}

}  // namespace
}  // namespace raftkv
