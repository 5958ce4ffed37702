#include "common/user_output.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/file_util.h"
#include "common/open_beneath.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class UserOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("user_output_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  static mode_t TypeOf(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
  }
  static ino_t InodeOf(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  fs::path dir_;
};

// Reads the FIFO `path` to its end on a thread. The test holds the FIFO open for reading and
// writing meanwhile (Linux lets O_RDWR open at once), so that the reader's own open returns at
// once, here, before anything is written; its reads end when Join drops the hold. If the FIFO
// was replaced instead of written to, the reader sees an empty stream and ends, rather than
// waiting for a writer forever.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path)
      : hold_(::open(path.c_str(), O_RDWR | O_CLOEXEC)),
        fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    thread_ = std::thread([this] {
      char buf[1 << 16];
      for (ssize_t n; fd_ >= 0 && (n = ::read(fd_, buf, sizeof buf)) > 0;) got_.append(buf, n);
    });
  }
  std::string Join() {
    if (hold_ >= 0) ::close(hold_);
    thread_.join();
    if (fd_ >= 0) ::close(fd_);
    return got_;
  }

 private:
  int hold_;
  int fd_;
  std::string got_;
  std::thread thread_;
};

TEST_F(UserOutputTest, DashIsStandardOutput) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);  // where a file named '-' would appear
  testing::internal::CaptureStdout();
  absl::Status s = WriteUserOutput("-", "to stdout\n");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "to stdout\n");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(fs::exists(dir_ / "-"));
  fs::current_path(cwd);
}

// /dev/fd/N (and /dev/stdout, /proc/self/fd/N), or a link to one: the open descriptor, written
// where it stands. Renaming over the link's target would replace the file the descriptor is on.
TEST_F(UserOutputTest, DescriptorNamesAreWrittenInPlace) {
  const std::string file = Path("redirected.txt");
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "before\n", 7), 7);
  const ino_t inode = InodeOf(file);
  absl::Status s = WriteUserOutput("/dev/fd/" + std::to_string(fd), "one\n");
  EXPECT_TRUE(s.ok()) << s;
  fs::create_symlink("/proc/self/fd/" + std::to_string(fd), Path("to-fd"));
  s = WriteUserOutput(Path("to-fd"), "two\n");
  EXPECT_TRUE(s.ok()) << s;
  ::close(fd);
  EXPECT_EQ(ReadFile(file).value_or(""), "before\none\ntwo\n");
  EXPECT_EQ(InodeOf(file), inode);
  EXPECT_EQ(TypeOf(Path("to-fd")), S_IFLNK);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
}

TEST_F(UserOutputTest, NewAndRegularFilesAreReplacedByRename) {
  const std::string file = Path("out.tsv");
  ASSERT_TRUE(WriteUserOutput(file, "first\n").ok());
  EXPECT_EQ(ReadFile(file).value_or(""), "first\n");
  const ino_t before = InodeOf(file);
  ASSERT_TRUE(WriteUserOutput(file, "second\n").ok());
  EXPECT_EQ(ReadFile(file).value_or(""), "second\n");
  // A new inode: a temporary file renamed over the old one, not the old one rewritten.
  EXPECT_NE(InodeOf(file), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1)
      << "a temporary file was left";
}

TEST_F(UserOutputTest, FifoIsWrittenInPlace) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // More than a pipe's buffer, so the writes wait on the reader.
  std::string data(1 << 20, 'x');
  data.back() = '\n';
  FifoReader reader(fifo);
  absl::Status s = WriteUserOutput(fifo, data);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(reader.Join().size(), data.size());
  EXPECT_EQ(TypeOf(fifo), S_IFIFO);
}

TEST_F(UserOutputTest, CharacterDeviceStaysADevice) {
  const std::string dev = Path("fakenull");
  if (::mknod(dev.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot mknod a character device here (not root): " << std::strerror(errno);
  }
  absl::Status s = WriteUserOutput(dev, "into the null device\n");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(TypeOf(dev), S_IFCHR);
  // Still the null device: reads end at once.
  std::ifstream in(dev);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "");
}

TEST_F(UserOutputTest, SocketIsConnectedTo) {
  const std::string sock = Path("sock");
  // Non-blocking: the connection is already queued when WriteUserOutput returns, and if it never
  // connected the accept fails at once instead of waiting.
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  sock.copy(addr.sun_path, sock.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  // Small enough for the socket's buffer: the write completes before the accept.
  absl::Status s = WriteUserOutput(sock, "over the socket\n");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(TypeOf(sock), S_IFSOCK);
  if (s.ok()) {
    const int conn = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(conn, 0) << "no connection: " << std::strerror(errno);
    std::string got;
    char buf[256];
    for (ssize_t n; (n = ::read(conn, buf, sizeof buf)) > 0;) got.append(buf, n);
    EXPECT_EQ(got, "over the socket\n");
    ::close(conn);
  }
  ::close(listener);
}

TEST_F(UserOutputTest, DirectoryIsRefused) {
  absl::Status s = WriteUserOutput(dir_.string(), "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(dir_.string() + ": is a directory"));
  EXPECT_EQ(WriteUserOutput("", "x").code(), absl::StatusCode::kInvalidArgument);
}

// Without a root a link is followed: a regular target is replaced atomically and the link stays.
TEST_F(UserOutputTest, LinkIsFollowedWithoutARoot) {
  const std::string target = Path("target.tsv");
  const std::string link = Path("link.tsv");
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  ASSERT_TRUE(WriteUserOutput(link, "new\n").ok());
  EXPECT_EQ(TypeOf(link), S_IFLNK);
  EXPECT_EQ(ReadFile(target).value_or(""), "new\n");

  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(fifo, Path("to-fifo"));
  FifoReader reader(fifo);
  absl::Status s = WriteUserOutput(Path("to-fifo"), "through the link\n");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(reader.Join(), "through the link\n");

  fs::create_symlink(Path("nothing"), Path("dangling"));
  s = WriteUserOutput(Path("dangling"), "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("symbolic link to a file that does not exist"));
  EXPECT_FALSE(fs::exists(Path("nothing")));
}

// Below an allowed root no link is followed, and the path must lie below the root.
TEST_F(UserOutputTest, RootRefusesLinksAndPathsOutside) {
  const std::string root = Path("root");
  fs::create_directories(root);
  const std::string outside = Path("outside.tsv");
  std::ofstream(outside) << "keep\n";
  fs::create_symlink(outside, root + "/link.tsv");
  absl::Status s = WriteUserOutput(root + "/link.tsv", "x", root);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("symbolic link"));
  EXPECT_EQ(TypeOf(root + "/link.tsv"), S_IFLNK);
  EXPECT_EQ(ReadFile(outside).value_or(""), "keep\n");

  s = WriteUserOutput(outside, "x", root);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is not below the directory"));
  s = WriteUserOutput(root + "/../outside.tsv", "x", root);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFile(outside).value_or(""), "keep\n");

  ASSERT_TRUE(WriteUserOutput(root + "/new.tsv", "new\n", root).ok());
  EXPECT_EQ(ReadFile(root + "/new.tsv").value_or(""), "new\n");
  const std::string fifo = root + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoReader reader(fifo);
  s = WriteUserOutput(fifo, "below the root\n", root);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(reader.Join(), "below the root\n");
  EXPECT_EQ(TypeOf(fifo), S_IFIFO);
}

// Defence in depth: the atomic writers themselves never rename over a FIFO (or a device).
TEST_F(UserOutputTest, AtomicWritersRefuseToReplaceAFifo) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = WriteFileAtomic(fifo, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(fifo + ": is a FIFO; a new file is not renamed over it"));
  EXPECT_EQ(TypeOf(fifo), S_IFIFO);
  s = WriteFileAtomicBeneath(dir_.string(), fifo, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TypeOf(fifo), S_IFIFO);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1)
      << "a temporary file was left";
  // A link is still replaced (the link itself, not its target), as before.
  fs::create_symlink(fifo, Path("link"));
  EXPECT_TRUE(WriteFileAtomic(Path("link"), "x").ok());
  EXPECT_EQ(TypeOf(Path("link")), S_IFREG);
  EXPECT_EQ(TypeOf(fifo), S_IFIFO);
}

}  // namespace
}  // namespace ringmaster
