// CheckFlagFiles (ops/flag_files.h): bad flag file lines are reported as
// FILE:LINE with the problem, good ones record where each flag was set.
#include "ops/flag_files.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/common/service_test_util.h"

DEFINE_int32(ff_test_int, 1, "flag_files_test: an int32");
DEFINE_uint64(ff_test_u64, 1, "flag_files_test: a uint64");
DEFINE_bool(ff_test_bool, false, "flag_files_test: a bool");
DEFINE_string(ff_test_string, "", "flag_files_test: a string");
DEFINE_double(ff_test_double, 0, "flag_files_test: a double");

namespace raftkv {
namespace {

using testing_util::TempDir;

class FlagFilesTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  Status Check(const std::vector<std::string>& args, std::map<std::string, std::string>* origin) {
    std::vector<char*> argv = {const_cast<char*>("prog")};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    return CheckFlagFiles(static_cast<int>(argv.size()), argv.data(), origin);
  }
  TempDir dir_;
};

TEST_F(FlagFilesTest, GoodFileRecordsWhereEachFlagWasSet) {
  const std::string inner = Write("inner.flags", "--ff_test_string=x y z\n");
  const std::string path =
      Write("good.flags", "# comment\n\n  --ff_test_int=-5\n--ff_test_u64=0x10\n--ff_test_bool\n"
                          "--noff_test_bool\n-ff_test_double=2.5\n--flagfile=" + inner + "\n");
  std::map<std::string, std::string> origin;
  Status s = Check({"--flagfile=" + path, "--other_flag_ignored=1"}, &origin);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(origin["ff_test_int"], path + ":3");
  EXPECT_EQ(origin["ff_test_bool"], path + ":6");
  EXPECT_EQ(origin["ff_test_double"], path + ":7");
  EXPECT_EQ(origin["ff_test_string"], inner + ":1");
  // The separate-argument form is checked too.
  EXPECT_TRUE(Check({"--flagfile", path}, nullptr).ok());
  // A flag given on the command line after the file is not the file's any
  // more; one given before it is overridden by the file.
  origin.clear();
  ASSERT_TRUE(Check({"--ff_test_double=9", "--flagfile=" + path, "--ff_test_int=7"}, &origin).ok());
  EXPECT_EQ(origin.count("ff_test_int"), 0u);
  EXPECT_EQ(origin["ff_test_double"], path + ":7");
}

TEST_F(FlagFilesTest, BadLinesAreReportedWithFileAndLine) {
  struct Case {
    std::string text;
    std::string expected;  // after "<path>:"
  };
  const std::vector<Case> cases = {
      {"--ff_test_int=1\n--no_such_flag=3\n", "2: unknown flag --no_such_flag"},
      {"--ff_test_int=abc\n", "1: --ff_test_int=abc: not a valid int32"},
      {"\n--ff_test_int=99999999999\n", "2: --ff_test_int=99999999999: not a valid int32"},
      {"--ff_test_u64=-1\n", "1: --ff_test_u64=-1: not a valid uint64"},
      {"--ff_test_bool=maybe\n", "1: --ff_test_bool=maybe: not a valid bool"},
      {"--ff_test_double=1.5x\n", "1: --ff_test_double=1.5x: not a valid double"},
      {"--ff_test_int\n", "1: --ff_test_int needs a value"},
      {"# ok\nff_test_int=3\n", "2: expected --name=value"},
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    SCOPED_TRACE(cases[n].text);
    const std::string path = Write("bad" + std::to_string(n) + ".flags", cases[n].text);
    Status s = Check({"--flagfile=" + path}, nullptr);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(path + ":" + cases[n].expected), std::string::npos) << s.message();
  }
  Status s = Check({"--flagfile=" + dir_.path() + "/missing.flags"}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.flags"), std::string::npos) << s.message();
  // A bad nested file names the nested file.
  const std::string bad = Write("nested-bad.flags", "--ff_test_int=x\n");
  const std::string outer = Write("outer.flags", "--flagfile=" + bad + "\n");
  s = Check({"--flagfile=" + outer}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(bad + ":1:"), std::string::npos) << s.message();
}

TEST_F(FlagFilesTest, MissingFilesSayWhyAndWhereTheyWereNamed) {
  const std::string missing = dir_.path() + "/missing.flags";
  Status s = Check({"--flagfile=" + missing}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot open flag file " + missing + ": No such file or directory"),
            std::string::npos)
      << s.message();
  // A missing nested file: the line that names it comes first.
  const std::string outer = Write("outer.flags", "# node flags\n--flagfile=" + missing + "\n");
  s = Check({"--flagfile=" + outer}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().find(outer + ":2: cannot open flag file " + missing), 0u) << s.message();
}

}  // namespace
}  // namespace raftkv
