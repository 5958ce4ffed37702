#include "agent/wire_text.h"

#include "common/log_escape.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::agent {
namespace {

// Every `string` field reachable in a message (nested, repeated, map keys and values) comes out
// valid UTF-8 without control characters; `bytes` fields and clean text are left as they were.
TEST(WireTextTest, EveryStringFieldIsMadeValidAndBytesFieldsAreKept) {
  v1::AgentMessage m;
  m.set_node_id("node-1");
  v1::RankProgress* r = m.add_ranks();
  r->set_job_id("j\xc3\xa9");  // valid, kept
  r->set_last_error_line("bad \xff\xfe{ \x1b[2J");
  r->set_collective_op("\xed\xa0\x80");  // a surrogate
  m.add_command_errors()->set_error("cut \xe2\x82");
  v1::LogTail* t = m.add_logs();
  t->set_data("raw \xff bytes\n");
  t->set_error("no log of 'x\xc3'");
  EXPECT_EQ(SanitizeStringFields(&m), 4u);
  EXPECT_EQ(m.node_id(), "node-1");
  EXPECT_EQ(m.ranks(0).job_id(), "j\xc3\xa9");
  EXPECT_EQ(m.ranks(0).last_error_line(), "bad \\xff\\xfe{ \\x1b[2J");
  EXPECT_EQ(m.ranks(0).collective_op(), "\\xed\\xa0\\x80");
  EXPECT_EQ(m.command_errors(0).error(), "cut \\xe2\\x82");
  EXPECT_EQ(m.logs(0).data(), "raw \xff bytes\n");  // bytes: the CLI escapes it when shown
  EXPECT_EQ(m.logs(0).error(), "no log of 'x\\xc3'");
  v1::AgentMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(SanitizeStringFields(&m), 0u);  // already clean
}

TEST(WireTextTest, MapsAndRepeatedStringsAreCovered) {
  v1::CoordinatorMessage m;
  v1::StartRanks* s = m.mutable_start_ranks();
  (*s->mutable_common_env())["K\xff"] = "v\x1b";
  (*s->add_ranks()->mutable_env())["RANK"] = "0\xc0";
  EXPECT_EQ(SanitizeStringFields(&m), 3u);
  EXPECT_EQ(m.start_ranks().common_env().at("K\\xff"), "v\\x1b");
  EXPECT_EQ(m.start_ranks().ranks(0).env().at("RANK"), "0\\xc0");
  v1::RegisterRequest req;
  req.mutable_inventory()->add_addresses("10.0.0.1");
  req.mutable_inventory()->add_addresses("host\xfe");
  EXPECT_EQ(SanitizeStringFields(&req), 1u);
  EXPECT_EQ(req.inventory().addresses(1), "host\\xfe");
}

}  // namespace
}  // namespace ringmaster::agent
