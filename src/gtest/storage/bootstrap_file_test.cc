#include "storage/bootstrap_file.h"

#include <gtest/gtest.h>

#include <string>

#include "gtest/common/temp_dir.h"
#include "gtest/common/bootstrap_v1.h"

namespace raftkv {
namespace {

using testing_util::ReadFileBytes;
using testing_util::TempDir;
using testing_util::WriteFileBytes;

MembershipConfig Members(std::initializer_list<std::pair<uint64_t, std::string>> members) {
  MembershipConfig config;
  for (const auto& [id, address] : members) {
    MemberConfig* m = config.add_members();
    m->set_id(id);
    m->set_address(address);
    m->set_voter(true);
  }
  return config;
}

TEST(BootstrapFileTest, MissingFileIsNotFound) {
  TempDir dir;
  BootstrapFile file(dir.Join("bootstrap"));
  MembershipConfig config = Members({{1, "a:1"}});
  uint64_t cluster_id = 7;
  bool found = true;
  ASSERT_TRUE(file.Load(&config, &cluster_id, &found).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(config.members_size(), 0);
  EXPECT_EQ(cluster_id, 0u);
}

TEST(BootstrapFileTest, SaveLoadRoundTripKeepsTheClusterId) {
  TempDir dir;
  const MembershipConfig saved = Members({{1, "a:1"}, {2, "b:2"}});
  ASSERT_TRUE(BootstrapFile(dir.Join("bootstrap")).Save(saved, 0xfedcba9876543210ull).ok());
  MembershipConfig config;
  uint64_t cluster_id = 0;
  bool found = false;
  Status s = BootstrapFile(dir.Join("bootstrap")).Load(&config, &cluster_id, &found);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(found);
  EXPECT_EQ(config.SerializeAsString(), saved.SerializeAsString());
  EXPECT_EQ(cluster_id, 0xfedcba9876543210ull);
}

// A file written before cluster ids existed (version 1) still loads; its
// cluster id is not known.
TEST(BootstrapFileTest, VersionOneLoadsWithoutAClusterId) {
  TempDir dir;
  const MembershipConfig saved = Members({{3, "c:3"}});
  testing_util::WriteVersionOneBootstrapFile(dir.Join("bootstrap"), saved);
  MembershipConfig config;
  uint64_t cluster_id = 9;
  bool found = false;
  Status s = BootstrapFile(dir.Join("bootstrap")).Load(&config, &cluster_id, &found);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(found);
  EXPECT_EQ(config.SerializeAsString(), saved.SerializeAsString());
  EXPECT_EQ(cluster_id, 0u);
}

TEST(BootstrapFileTest, DamageIsCorruptionNamingThePath) {
  TempDir dir;
  const std::string path = dir.Join("bootstrap");
  ASSERT_TRUE(BootstrapFile(path).Save(Members({{1, "a:1"}}), 42).ok());
  std::string bytes = ReadFileBytes(path);
  for (size_t at : {size_t{4}, bytes.size() - 12, bytes.size() - 1}) {  // version, id, crc
    std::string damaged = bytes;
    damaged[at] ^= 0x01;
    WriteFileBytes(path, damaged);
    MembershipConfig config;
    uint64_t cluster_id = 0;
    bool found = false;
    Status s = BootstrapFile(path).Load(&config, &cluster_id, &found);
    EXPECT_TRUE(s.IsCorruption()) << "byte " << at << ": " << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  }
  WriteFileBytes(path, bytes.substr(0, bytes.size() - 3));
  MembershipConfig config;
  uint64_t cluster_id = 0;
  bool found = false;
  EXPECT_TRUE(BootstrapFile(path).Load(&config, &cluster_id, &found).IsCorruption());
}

TEST(BootstrapFileTest, ClusterIdDependsOnMembersAddressesAndToken) {
  const uint64_t base = ClusterIdOf(Members({{1, "a:1"}, {2, "b:2"}, {3, "c:3"}}), "t");
  EXPECT_NE(base, 0u);
  // Whatever the order the members are listed in.
  EXPECT_EQ(ClusterIdOf(Members({{3, "c:3"}, {1, "a:1"}, {2, "b:2"}}), "t"), base);
  EXPECT_NE(ClusterIdOf(Members({{1, "a:1"}, {2, "b:2"}, {3, "c:3"}}), "u"), base);
  EXPECT_NE(ClusterIdOf(Members({{1, "a:1"}, {2, "b:2"}, {3, "c:4"}}), "t"), base);
  EXPECT_NE(ClusterIdOf(Members({{1, "a:1"}, {2, "b:2"}, {4, "c:3"}}), "t"), base);
  EXPECT_NE(ClusterIdOf(Members({{1, "a:1"}, {2, "b:2"}}), "t"), base);
  // Fields do not run into each other.
  EXPECT_NE(ClusterIdOf(Members({{1, "a:1"}}), "ta"), ClusterIdOf(Members({{1, "a:1"}}), "t"));
  EXPECT_EQ(ClusterIdHex(0xab01), "ab01");
}

}  // namespace
}  // namespace raftkv
