#include "jobspec/job_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ringmaster::jobspec {
namespace {

// Every name parses to a value that prints as the same name, and no two entries share a name or
// a value: the table is the one definition of the setting.
template <typename E>
void ExpectTableRoundTrips() {
  std::set<std::string_view> names;
  std::set<E> values;
  for (const auto& [value, name] : SettingTable<E>::kNames) {
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_TRUE(values.insert(value).second) << name;
    ASSERT_TRUE(ParseSetting<E>(name).has_value()) << name;
    EXPECT_EQ(*ParseSetting<E>(name), value) << name;
    EXPECT_EQ(SettingName(value), name);
  }
  EXPECT_FALSE(ParseSetting<E>("").has_value());
  EXPECT_FALSE(ParseSetting<E>("AUTO").has_value());  // exact, lower case
}

TEST(JobSettingsTest, EveryTableRoundTrips) {
  ExpectTableRoundTrips<Sharding>();
  ExpectTableRoundTrips<Compression>();
  ExpectTableRoundTrips<Precision>();
  ExpectTableRoundTrips<Backend>();
  ExpectTableRoundTrips<LrScheduleKind>();
  ExpectTableRoundTrips<Device>();
}

TEST(JobSettingsTest, AllowedNamesAreInTableOrder) {
  EXPECT_EQ(AllowedSettingNames<Sharding>(), "full_shard, shard_grad_op, no_shard, hybrid_shard");
  EXPECT_EQ(AllowedSettingNames<Compression>(), "auto, none, fp16, bf16, int8, powersgd");
  EXPECT_EQ(AllowedSettingNames<Precision>(), "auto, fp32, fp16, bf16");
  EXPECT_EQ(AllowedSettingNames<Backend>(), "auto, nccl, gloo");
  EXPECT_EQ(AllowedSettingNames<LrScheduleKind>(), "linear, constant, cosine, polynomial");
  EXPECT_EQ(AllowedSettingNames<Device>(), "cpu, cuda, auto");
}

TEST(JobSettingsTest, ParseSettingOrErrorNamesTheValueAndTheChoices) {
  absl::StatusOr<Precision> p = ParseSettingOrError<Precision>("fp8");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "'fp8' is not one of: auto, fp32, fp16, bf16");
  absl::StatusOr<Precision> ok = ParseSettingOrError<Precision>("bf16");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, Precision::kBf16);
}

}  // namespace
}  // namespace ringmaster::jobspec
