#include "cuda_emu/nccl_emu_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"

namespace cuda_emu::nccl {
namespace {

constexpr uint32_t kReadyMagic = 0x4e43454d;  // "NCEM"
constexpr size_t kPage = 4096;
constexpr size_t kDefaultSlotBytes = size_t{1} << 20;

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

size_t DataOffset() { return RoundUp(sizeof(SegmentHeader), kPage); }

// Slot size from NCCL_EMU_SLOT_BYTES (tests use small values to exercise chunking), at least
// 64 * 8 bytes so a reduce-scatter chunk holds one 8-byte element per rank, a multiple of 8.
size_t SlotBytesFromEnv() {
  const char* v = std::getenv("NCCL_EMU_SLOT_BYTES");
  size_t bytes = kDefaultSlotBytes;
  if (v != nullptr && *v != '\0') bytes = std::strtoull(v, nullptr, 10);
  return RoundUp(std::max<size_t>(bytes, kMaxRanks * 8), 8);
}

}  // namespace

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

char* Segment::coll_slot(int rank) const {
  return static_cast<char*>(base_) + DataOffset() + rank * header_->coll_slot_bytes;
}

char* Segment::p2p_slot(int src, int dst) const {
  const size_t n = header_->nranks;
  return static_cast<char*>(base_) + DataOffset() + n * header_->coll_slot_bytes +
         (src * n + dst) * header_->p2p_slot_bytes;
}

void Segment::Unlink() {
  if (unlinked_ || name_.empty()) return;
  unlinked_ = true;
  shm_unlink(name_.c_str());
}

std::string Segment::Open(const std::string& name, int nranks,
                          std::chrono::steady_clock::time_point deadline) {
  name_ = name;
  fd_ = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd_ >= 0) {  // The creator: size it (zero-filled: every counter starts at 0) and publish.
    const size_t slot = SlotBytesFromEnv();
    const size_t coll = slot, p2p = RoundUp(slot / 4, 8);
    bytes_ = DataOffset() + nranks * coll + static_cast<size_t>(nranks) * nranks * p2p;
    if (ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) {
      const std::string err =
          absl::StrFormat("ftruncate(%s, %d): %s", name, bytes_, std::strerror(errno));
      Unlink();
      return err;
    }
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      const std::string err = absl::StrFormat("mmap(%s): %s", name, std::strerror(errno));
      Unlink();
      return err;
    }
    header_ = static_cast<SegmentHeader*>(base_);
    header_->nranks = nranks;
    header_->coll_slot_bytes = coll;
    header_->p2p_slot_bytes = p2p;
    header_->total_bytes = bytes_;
    header_->ready.store(kReadyMagic, std::memory_order_release);
    return "";
  }
  if (errno != EEXIST) return absl::StrFormat("shm_open(%s): %s", name, std::strerror(errno));
  // Another rank created it: wait until it has sized and published it.
  while (true) {
    if (fd_ < 0) fd_ = shm_open(name.c_str(), O_RDWR, 0);
    struct stat st;
    if (fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_size > 0) {
      bytes_ = static_cast<size_t>(st.st_size);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::StrFormat("shared-memory segment %s was not created in time", name);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return absl::StrFormat("mmap(%s): %s", name, std::strerror(errno));
  }
  header_ = static_cast<SegmentHeader*>(base_);
  while (header_->ready.load(std::memory_order_acquire) != kReadyMagic) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::StrFormat("shared-memory segment %s was not initialised in time", name);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (header_->nranks != nranks || header_->total_bytes != bytes_) {
    return absl::StrFormat("communicator %s was created for %d ranks, this rank says %d", name,
                           header_->nranks, nranks);
  }
  return "";
}

}  // namespace cuda_emu::nccl
