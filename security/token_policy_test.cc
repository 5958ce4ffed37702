#include "security/token_policy.h"

#include <gtest/gtest.h>

namespace ringmaster::security {
namespace {

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
}

TEST(TokenPolicyTest, DefaultPolicyAllowsEverything) {
  TokenPolicy open;
  for (Access a : {Access::kAgent, Access::kSubmit, Access::kLogs, Access::kRead}) {
    EXPECT_TRUE(open.Check(a, "").ok());
    EXPECT_TRUE(open.Check(a, "Bearer anything").ok());
  }
}

TEST(TokenPolicyTest, EachCallNeedsItsToken) {
  TokenPolicy p("join-123", "submit-456");
  EXPECT_TRUE(p.Check(Access::kAgent, "Bearer join-123").ok());
  EXPECT_TRUE(p.Check(Access::kSubmit, "Bearer submit-456").ok());
  EXPECT_TRUE(p.Check(Access::kLogs, "Bearer submit-456").ok());
  EXPECT_TRUE(p.Check(Access::kRead, "Bearer submit-456").ok());
  EXPECT_TRUE(p.Check(Access::kRead, "bearer join-123").ok());  // the scheme is case-blind

  // The join token does not submit, read logs, and the submit token does not join.
  EXPECT_EQ(p.Check(Access::kSubmit, "Bearer join-123").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.Check(Access::kLogs, "Bearer join-123").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.Check(Access::kAgent, "Bearer submit-456").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.Check(Access::kRead, "Bearer nope").code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenPolicyTest, MessagesNameTheTokenNeverItsValue) {
  TokenPolicy p("join-123", "submit-456");
  absl::Status missing = p.Check(Access::kSubmit, "");
  EXPECT_NE(missing.message().find("submit token"), std::string_view::npos) << missing;
  EXPECT_NE(missing.message().find("none was sent"), std::string_view::npos) << missing;
  absl::Status wrong = p.Check(Access::kAgent, "Bearer submit-456");
  EXPECT_NE(wrong.message().find("join token"), std::string_view::npos) << wrong;
  EXPECT_NE(wrong.message().find("wrong"), std::string_view::npos) << wrong;
  for (const absl::Status& s : {missing, wrong, p.Check(Access::kRead, "Bearer join-12")}) {
    EXPECT_EQ(s.message().find("join-12"), std::string_view::npos) << s;
    EXPECT_EQ(s.message().find("submit-456"), std::string_view::npos) << s;
  }
}

TEST(TokenPolicyTest, MalformedAuthorizationIsRefused) {
  TokenPolicy p("join-123", std::nullopt);
  EXPECT_FALSE(p.Check(Access::kAgent, "join-123").ok());
  EXPECT_FALSE(p.Check(Access::kAgent, "Bearer ").ok());
  EXPECT_FALSE(p.Check(Access::kAgent, "Basic am9pbi0xMjM=").ok());
}

TEST(TokenPolicyTest, AnUnsetTokenIsNotChecked) {
  TokenPolicy join_only("join-123", std::nullopt);
  EXPECT_TRUE(join_only.Check(Access::kSubmit, "").ok());
  EXPECT_TRUE(join_only.Check(Access::kRead, "").ok());  // whoever may submit may read
  EXPECT_FALSE(join_only.Check(Access::kAgent, "").ok());
  TokenPolicy submit_only(std::nullopt, "submit-456");
  EXPECT_TRUE(submit_only.Check(Access::kAgent, "").ok());
  EXPECT_FALSE(submit_only.Check(Access::kSubmit, "Bearer x").ok());
}

}  // namespace
}  // namespace ringmaster::security
