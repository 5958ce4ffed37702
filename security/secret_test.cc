#include "security/secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace ringmaster::security {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::string WriteTemp(const std::string& name, const std::string& data) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/secret_test_" + name;
  std::ofstream(path, std::ios::trunc) << data;
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(ReadSecretTest, NeitherSetIsNoSecret) {
  absl::StatusOr<std::optional<std::string>> s = ReadSecret("join token", "", "TOKEN", Env({}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->has_value());
}

TEST(ReadSecretTest, FileWinsOverEnvironmentAndLosesOneNewline) {
  const std::string path = WriteTemp("a", "abc123\n");
  absl::StatusOr<std::optional<std::string>> s =
      ReadSecret("join token", path, "TOKEN", Env({{"TOKEN", "fromenv"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(**s, "abc123");
  s = ReadSecret("join token", "", "TOKEN", Env({{"TOKEN", "fromenv\r\n"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(**s, "fromenv");
}

TEST(ReadSecretTest, RefusesEmptyOddAndMissing) {
  absl::StatusOr<std::optional<std::string>> s =
      ReadSecret("join token", WriteTemp("empty", "\n"), "", Env({}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("empty"), std::string_view::npos) << s.status();
  s = ReadSecret("join token", "", "TOKEN", Env({{"TOKEN", ""}}));
  EXPECT_FALSE(s.ok());
  s = ReadSecret("submit token", WriteTemp("space", "two words\n"), "", Env({}));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("two words"), std::string_view::npos) << s.status();
  s = ReadSecret("submit token", "/nonexistent/token", "", Env({}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/token"), std::string_view::npos) << s.status();
}

}  // namespace
}  // namespace ringmaster::security
