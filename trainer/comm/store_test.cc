#include "trainer/comm/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"

namespace ringmaster::trainer {
namespace {

std::string MakeTempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "store_test.XXXXXX").string();
  char* dir = ::mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

class TempDir {
 public:
  TempDir() : path_(MakeTempDir()) {}
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The same behavioural checks run against every Store implementation.
void CheckStoreBasics(Store& store) {
  ASSERT_TRUE(store.Set("a", "1").ok());
  ASSERT_TRUE(store.Set("b", std::string("bin\0ary", 7)).ok());
  absl::StatusOr<std::string> a = store.Get("a", absl::Seconds(5));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "1");
  absl::StatusOr<std::string> b = store.Get("b", absl::Seconds(5));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::string("bin\0ary", 7));

  ASSERT_TRUE(store.Set("a", "2").ok());  // Overwrite.
  EXPECT_EQ(*store.Get("a", absl::Seconds(5)), "2");

  EXPECT_TRUE(store.Wait({"a", "b"}, absl::Seconds(5)).ok());
  EXPECT_TRUE(store.Wait({}, absl::ZeroDuration()).ok());

  absl::StatusOr<std::string> missing = store.Get("nope", absl::Milliseconds(30));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "'nope'")) << missing.status();

  absl::Status w = store.Wait({"a", "gone1", "b", "gone2"}, absl::Milliseconds(30));
  EXPECT_EQ(w.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(w.message(), "'gone1', 'gone2'")) << w;
  EXPECT_FALSE(absl::StrContains(w.message(), "'a'")) << w;
}

// A Get that starts before the Set (or after: either order must work) returns the value.
void CheckGetWaitsForSet(Store& store) {
  absl::StatusOr<std::string> got;
  absl::Status waited;
  std::thread reader([&] {
    got = store.Get("late", absl::Seconds(10));
    waited = store.Wait({"late", "late2"}, absl::Seconds(10));
  });
  ASSERT_TRUE(store.Set("late", "v").ok());
  ASSERT_TRUE(store.Set("late2", "w").ok());
  reader.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST(FileStoreTest, Basics) {
  TempDir dir;
  auto store = FileStore::Create(dir.path() + "/sub/dir");
  ASSERT_TRUE(store.ok()) << store.status();
  CheckStoreBasics(**store);
}

TEST(FileStoreTest, GetWaitsForSet) {
  TempDir dir;
  auto store = FileStore::Create(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  CheckGetWaitsForSet(**store);
}

TEST(FileStoreTest, TwoInstancesOnOneDirectoryShareKeys) {
  TempDir dir;
  auto writer = FileStore::Create(dir.path());
  auto reader = FileStore::Create(dir.path());
  ASSERT_TRUE(writer.ok() && reader.ok());
  ASSERT_TRUE((*writer)->Set("rank_0", "addr").ok());
  EXPECT_EQ(*(*reader)->Get("rank_0", absl::Seconds(5)), "addr");
}

TEST(FileStoreTest, HostileKeysMapToDistinctSafeNames) {
  const std::string long_a(400, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';
  const std::vector<std::string> keys = {"",    ".",  "..",   "a/b",  "a%2Fb", "a.tmp.1",
                                         "a b", "\n", long_a, long_b, "A",     "a"};
  std::set<std::string> names;
  for (const std::string& k : keys) {
    std::string name = FileStore::FileNameForKey(k);
    EXPECT_LE(name.size(), 200u) << k;
    EXPECT_EQ(name.find('/'), std::string::npos) << k;
    EXPECT_EQ(name.find('.'), std::string::npos) << k;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), keys.size());

  TempDir dir;
  auto store = FileStore::Create(dir.path());
  ASSERT_TRUE(store.ok());
  for (const std::string& k : keys) ASSERT_TRUE((*store)->Set(k, "v:" + k).ok()) << k;
  for (const std::string& k : keys) EXPECT_EQ(*(*store)->Get(k, absl::Seconds(1)), "v:" + k);
  // Nothing escaped the directory, and no temporaries were left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);
    ++files;
  }
  EXPECT_EQ(files, keys.size());
}

TEST(FileStoreTest, RejectsEmptyDirectory) { EXPECT_FALSE(FileStore::Create("").ok()); }

TEST(FakeStoreTest, Basics) {
  FakeStore store;
  CheckStoreBasics(store);
}

TEST(FakeStoreTest, GetWaitsForSet) {
  FakeStore store;
  CheckGetWaitsForSet(store);
}

TEST(PrefixStoreTest, IsolatesGenerations) {
  FakeStore base;
  PrefixStore gen0("gen0/", base);
  PrefixStore gen1("gen1/", base);
  ASSERT_TRUE(gen0.Set("k", "old").ok());
  EXPECT_EQ(*base.Get("gen0/k", absl::Seconds(1)), "old");
  EXPECT_FALSE(gen1.Get("k", absl::Milliseconds(10)).ok());
  ASSERT_TRUE(gen1.Set("k", "new").ok());
  EXPECT_EQ(*gen1.Get("k", absl::Seconds(1)), "new");
  EXPECT_TRUE(gen1.Wait({"k"}, absl::Seconds(1)).ok());
  EXPECT_EQ(*gen0.Get("k", absl::Seconds(1)), "old");
}

TEST(GlooStoreAdapterTest, ForwardsAndThrowsOnTimeout) {
  FakeStore base;
  std::unique_ptr<gloo::rendezvous::Store> gloo_store = MakeGlooStore(base, absl::Milliseconds(20));
  gloo_store->set("x", std::vector<char>{'h', 'i'});
  EXPECT_EQ(*base.Get("x", absl::Seconds(1)), "hi");
  EXPECT_EQ(gloo_store->get("x"), (std::vector<char>{'h', 'i'}));
  gloo_store->wait({"x"});
  gloo_store->wait({"x"}, std::chrono::milliseconds(10));
  try {
    gloo_store->get("missing");
    FAIL() << "get of a missing key returned";
  } catch (const gloo::IoException& e) {
    EXPECT_TRUE(absl::StrContains(e.what(), "'missing'")) << e.what();
  }
  EXPECT_THROW(gloo_store->wait({"missing"}, std::chrono::milliseconds(10)), gloo::IoException);
}

}  // namespace
}  // namespace ringmaster::trainer
