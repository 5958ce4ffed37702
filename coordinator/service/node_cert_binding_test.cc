#include "coordinator/service/node_cert_binding.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(NodeCertBindingTest, ANodeNameMustBeOneTheCertificateCarries) {
  NodeCertBinding off;
  EXPECT_TRUE(CheckNodeCertificate(off, "node-b", {"node-a"}).ok());

  NodeCertBinding on;
  on.enabled = true;
  EXPECT_TRUE(CheckNodeCertificate(on, "node-a", {"node-a"}).ok());
  EXPECT_TRUE(CheckNodeCertificate(on, "node-a", {"agents", "node-a"}).ok());  // a SAN
  absl::Status s = CheckNodeCertificate(on, "node-b", {"node-a", "node-a.example"});
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("node name 'node-b' is not named by the client certificate "
                                     "(CN and subjectAltNames 'node-a', 'node-a.example')"));
  EXPECT_THAT(CheckNodeCertificate(on, "node-b", {}).message(), HasSubstr("it names nothing"));
  // Names are compared whole: a prefix or a different case is another name.
  EXPECT_FALSE(CheckNodeCertificate(on, "node", {"node-a"}).ok());
  EXPECT_FALSE(CheckNodeCertificate(on, "Node-A", {"node-a"}).ok());
}

TEST(NodeCertBindingTest, TheMapAllowsFurtherCertificateNames) {
  absl::StatusOr<NodeCertBinding> map = ParseNodeCertMap(
      "# rack 1\nnode-1 rack1-agents\nnode-2 rack1-agents  # shared\n\n"
      "node-2 spare\n",
      "map.txt");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(map->enabled);
  EXPECT_TRUE(CheckNodeCertificate(*map, "node-1", {"rack1-agents"}).ok());
  EXPECT_TRUE(CheckNodeCertificate(*map, "node-2", {"spare"}).ok());
  EXPECT_TRUE(CheckNodeCertificate(*map, "node-3", {"node-3"}).ok());  // its own name still
  EXPECT_EQ(CheckNodeCertificate(*map, "node-3", {"rack1-agents"}).code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<NodeCertBinding> bad = ParseNodeCertMap("node-1\n", "map.txt");
  EXPECT_THAT(bad.status().message(), HasSubstr("map.txt:1: expected 'NODE_NAME CERT_NAME'"));
  EXPECT_FALSE(LoadNodeCertMap("/nonexistent/map.txt").ok());
}

}  // namespace
}  // namespace ringmaster::coordinator
