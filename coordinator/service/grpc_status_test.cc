// ToGrpcStatus / FromGrpcStatus: every code maps to the same code, messages survive.
#include "coordinator/service/grpc_status.h"

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

TEST(GrpcStatusTest, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, EveryCodeRoundTripsWithItsMessage) {
  for (int c = 1; c <= 16; ++c) {
    const absl::Status in(static_cast<absl::StatusCode>(c), "why " + std::to_string(c));
    const grpc::Status g = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(g.error_message(), "why " + std::to_string(c));
    EXPECT_EQ(FromGrpcStatus(g), in);
  }
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("job-1")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(GrpcStatusTest, UnknownCodesBecomeUnknown) {
  const grpc::Status g = ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(99), "odd"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(g.error_message(), "odd");
}

}  // namespace
}  // namespace ringmaster::coordinator
