// ctest-labels: unit
#include "common/flags.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

using Action = FlagSet::Action;

// A CLI-shaped set: two commands, a global valued flag, command flags and a list.
struct Cli {
  std::string coordinator = "127.0.0.1:7070";
  bool follow = false;
  bool insecure = false;
  std::vector<std::string> roots;
  FlagSet fs{"prog", "a test program"};
  Cli() {
    fs.AddCommand("submit", "JOB.yaml", "submits a job");
    fs.AddCommand("logs", "JOB --rank N", "shows a log");
    fs.Value("--coordinator", "HOST:PORT", &coordinator, "127.0.0.1:7070", "where it is");
    fs.Switch("--insecure", &insecure, "plaintext");
    fs.Switch("--follow", &follow, "follow it", {"submit"});
    fs.Value("--rank", "N", nullptr, "required", "the rank", {"logs"});
    fs.Value("--max-len", "N", nullptr, "128", "tokens", {"submit"});
    fs.Value("--max-len", "N", nullptr, "512", "tokens", {"logs"});
    fs.List("--root", "DIR", &roots, "allowed roots", {"submit"});
  }
  absl::StatusOr<Action> Parse(std::vector<std::string> args) { return fs.Parse(args); }
};

TEST(FlagSetTest, FlagsInAnyPositionAndBothValueForms) {
  Cli c;
  ASSERT_EQ(*c.Parse({"--follow", "submit", "--coordinator=h:1", "job.yaml", "--insecure"}),
            Action::kRun);
  EXPECT_EQ(c.fs.command(), "submit");
  EXPECT_EQ(c.fs.positional(), std::vector<std::string>{"job.yaml"});
  EXPECT_EQ(c.coordinator, "h:1");
  EXPECT_TRUE(c.follow);
  EXPECT_TRUE(c.insecure);

  Cli d;
  ASSERT_EQ(*d.Parse({"--coordinator", "h:2", "logs", "j1", "--rank", "3"}), Action::kRun);
  EXPECT_EQ(d.fs.command(), "logs");  // "h:2" is the flag's value, not the command
  EXPECT_EQ(d.fs.positional(), std::vector<std::string>{"j1"});
  EXPECT_EQ(d.fs.value("--rank"), "3");
  EXPECT_TRUE(d.fs.given("--rank"));
  EXPECT_FALSE(d.fs.given("--coordinator-x"));
  EXPECT_EQ(d.coordinator, "h:2");
  EXPECT_FALSE(d.follow);
}

TEST(FlagSetTest, ListsSwitchValuesAndDoubleDash) {
  Cli c;
  ASSERT_EQ(*c.Parse({"submit", "--root", "/a", "--root=/b", "--follow=false", "--", "--x"}),
            Action::kRun);
  EXPECT_EQ(c.roots, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_FALSE(c.follow);
  EXPECT_EQ(c.fs.positional(), std::vector<std::string>{"--x"});
  EXPECT_FALSE(c.Parse({"submit", "--follow=maybe"}).ok());
}

TEST(FlagSetTest, HelpAndVersionWinAnywhere) {
  for (std::vector<std::string> args : {std::vector<std::string>{"-h"},
                                        {"--help"},
                                        {"submit", "--help"},
                                        {"help"},
                                        {"help", "logs"},
                                        {"logs", "--bogus", "-h"}}) {
    Cli c;
    absl::StatusOr<Action> a = c.Parse(args);
    ASSERT_TRUE(a.ok()) << args[0];
    EXPECT_EQ(*a, Action::kHelp) << args[0];
  }
  Cli c;
  EXPECT_EQ(*c.Parse({"submit", "--version"}), Action::kVersion);
  EXPECT_EQ(*c.Parse({"--version"}), Action::kVersion);
}

TEST(FlagSetTest, HelpListsEveryFlagWithItsDefault) {
  Cli c;
  const std::string all = c.fs.Help();
  EXPECT_NE(all.find("submit JOB.yaml"), std::string::npos) << all;
  EXPECT_NE(all.find("--coordinator HOST:PORT"), std::string::npos) << all;
  EXPECT_NE(all.find("default: 127.0.0.1:7070"), std::string::npos) << all;
  EXPECT_NE(all.find("flags of submit:\n  --follow"), std::string::npos) << all;
  EXPECT_NE(all.find("default: 512"), std::string::npos) << "every command's flags";
  const std::string submit = c.fs.Help("submit");
  EXPECT_NE(submit.find("--follow"), std::string::npos) << submit;
  EXPECT_NE(submit.find("default: 128"), std::string::npos) << submit;
  EXPECT_EQ(submit.find("default: 512"), std::string::npos) << submit;
  EXPECT_NE(submit.find("--coordinator"), std::string::npos) << "globals in every command's";
  EXPECT_NE(c.fs.Help("logs").find("default: 512"), std::string::npos);
}

TEST(FlagSetTest, ErrorsNameTheProblemAndTheNearestFlag) {
  Cli c;
  absl::StatusOr<Action> a = c.Parse({"submit", "j", "--folow"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown flag '--folow'; did you mean --follow?");
  a = c.Parse({"logs", "j", "--follow"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--follow is not a flag of 'logs'"), std::string::npos);
  a = c.Parse({"logs", "j", "--rank"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--rank needs a value"), std::string::npos);
  a = c.Parse({"sumbit", "j"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown command 'sumbit'; did you mean 'submit'?");
  a = c.Parse({"--insecure"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "no command");
}

TEST(FlagSetTest, WithoutCommandsEveryPositionalIsAnArgument) {
  std::string listen;
  FlagSet fs("server", "serves");
  fs.Value("--listen", "HOST:PORT", &listen, "required", "where");
  ASSERT_EQ(*fs.Parse({"a", "--listen=x:1", "b"}), Action::kRun);
  EXPECT_EQ(fs.command(), "");
  EXPECT_EQ(fs.positional(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(listen, "x:1");
  EXPECT_EQ(*fs.Parse({"-h"}), Action::kHelp);
  EXPECT_NE(fs.Help().find("--listen HOST:PORT"), std::string::npos);
  EXPECT_FALSE(fs.Parse({"--lisen", "x"}).ok());
}

}  // namespace
}  // namespace ringmaster
