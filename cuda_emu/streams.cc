// Streams and events as in-order queues, run eagerly or lazily (streams.h).
#include "cuda_emu/streams.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_emu/census.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"

namespace cuda_emu {
namespace {

// One stream's queue. Items carry sequence numbers 1, 2, ...; `done` is the last finished.
struct Queue {
  int device = 0;
  std::mutex mu;
  std::condition_variable cv;
  // Each item returns true when finished; polled items (SubmitPolled) may return false.
  std::deque<std::pair<uint64_t, std::function<bool()>>> items;
  uint64_t enqueued = 0;
  uint64_t done = 0;
  bool running = false;  // an item is running (popped, not finished)
  std::thread::id runner;
};

// Every live stream by creation number, so event waits find a stream that may be gone (a
// destroyed stream was drained first) and device-wide waits find all of a device's.
struct Registry {
  std::mutex mu;
  uint64_t next = 0;
  std::map<uint64_t, std::shared_ptr<Queue>> live;
};
Registry& R() {
  static Registry* r = new Registry;
  return *r;
}

std::shared_ptr<Queue> Lookup(uint64_t id) {
  std::lock_guard<std::mutex> l(R().mu);
  auto it = R().live.find(id);
  return it == R().live.end() ? nullptr : it->second;
}

// Runs `q`'s items up to sequence number `seq`. Another thread running one of them is waited
// for; this thread running one (an event wait inside a queued item of the same stream) returns:
// the items before it have finished. A polled item that is not finished is called again until
// it is, or, when `poll_only` (a query: a GPU never blocks one), put back and left for later.
void DrainUpTo(Queue& q, uint64_t seq, bool poll_only = false) {
  std::unique_lock<std::mutex> l(q.mu);
  while (q.done < seq) {
    if (q.running) {
      if (q.runner == std::this_thread::get_id()) return;
      q.cv.wait(l);
      continue;
    }
    if (q.items.empty()) return;
    auto item = std::move(q.items.front());
    q.items.pop_front();
    q.running = true;
    q.runner = std::this_thread::get_id();
    l.unlock();
    bool finished = item.second();
    for (int spins = 0; !finished && !poll_only; ++spins) {
      if (spins < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      finished = item.second();
    }
    l.lock();
    if (!finished) {
      q.items.push_front(std::move(item));
      q.running = false;
      q.cv.notify_all();
      return;
    }
    q.done = item.first;
    q.running = false;
    q.cv.notify_all();
  }
}

// Whether `q` has finished its items up to `seq` (UINT64_MAX: everything queued so far).
bool Finished(Queue& q, uint64_t seq) {
  std::lock_guard<std::mutex> l(q.mu);
  return q.done >= std::min(seq, q.enqueued);
}

void DrainAll(Queue& q) { DrainUpTo(q, UINT64_MAX); }

}  // namespace
}  // namespace cuda_emu

struct CUstream_st {
  uint64_t id;
  std::shared_ptr<cuda_emu::Queue> queue;
};
struct CUevent_st {
  int device;
  bool recorded = false;
  // When the record ran; shared with the queued record, which may run after the event is gone.
  std::shared_ptr<std::chrono::steady_clock::time_point> when =
      std::make_shared<std::chrono::steady_clock::time_point>();
  uint64_t stream = 0;  // the recording stream's id (0: legacy, nothing to wait for)
  uint64_t seq = 0;     // the record's place in that stream
};

namespace cuda_emu {

bool IsLegacyStream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

void DrainDevice() {
  // Eager streams never hold work: no lookup on the hot paths (every blocking call).
  if (!GetOptions().lazy_streams) return;
  std::vector<std::shared_ptr<Queue>> queues;
  {
    std::lock_guard<std::mutex> l(R().mu);
    for (const auto& [id, q] : R().live) {
      if (q->device == CurrentDevice()) queues.push_back(q);
    }
  }
  for (const auto& q : queues) DrainAll(*q);
}

void Drain(cudaStream_t s) {
  if (IsLegacyStream(s)) {
    DrainDevice();
  } else {
    DrainAll(*s->queue);
  }
}

void SubmitPolled(cudaStream_t s, std::function<bool()> work) {
  if (IsLegacyStream(s) || !GetOptions().lazy_streams) {
    if (IsLegacyStream(s)) DrainDevice();
    for (int spins = 0; !work(); ++spins) {
      if (spins < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    return;
  }
  Queue& q = *s->queue;
  std::lock_guard<std::mutex> l(q.mu);
  q.items.emplace_back(++q.enqueued, std::move(work));
}

void Submit(cudaStream_t s, std::function<void()> work) {
  if (IsLegacyStream(s) || !GetOptions().lazy_streams) {
    if (IsLegacyStream(s)) DrainDevice();
    work();
    return;
  }
  SubmitPolled(s, [work = std::move(work)] {
    work();
    return true;
  });
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (s == nullptr) return cudaErrorInvalidValue;
  auto q = std::make_shared<cuda_emu::Queue>();
  q->device = cuda_emu::CurrentDevice();
  std::lock_guard<std::mutex> l(cuda_emu::R().mu);
  const uint64_t id = ++cuda_emu::R().next;
  cuda_emu::R().live[id] = q;
  *s = new CUstream_st{id, std::move(q)};
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int, int) {
  return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (cuda_emu::IsLegacyStream(s)) return cudaErrorInvalidResourceHandle;
  cuda_emu::DrainAll(*s->queue);  // queued work still runs, as on a GPU
  {
    std::lock_guard<std::mutex> l(cuda_emu::R().mu);
    cuda_emu::R().live.erase(s->id);
  }
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  cuda_emu::CensusSyncCall(cuda_emu::CensusSync::kStream);
  cuda_emu::Drain(s);
  return cuda_emu::StickyError();
}
// A query of queued work says "not ready" and lets the work run: a GPU makes progress without
// the host waiting, and code that polls (NCCL's Work::Wait) must see it finish.
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (!cuda_emu::IsLegacyStream(s) && !cuda_emu::Finished(*s->queue, UINT64_MAX)) {
    cuda_emu::DrainUpTo(*s->queue, UINT64_MAX, /*poll_only=*/true);
    return cudaErrorNotReady;
  }
  return cuda_emu::StickyError();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream != 0) {
    // Later work on `s` starts after the recording stream's work up to the record: queued on
    // `s`, so neither stream runs before something waits for `s`.
    cuda_emu::Submit(s, [stream = e->stream, seq = e->seq] {
      if (auto q = cuda_emu::Lookup(stream)) cuda_emu::DrainUpTo(*q, seq);
    });
  }
  return cuda_emu::StickyError();
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (e == nullptr) return cudaErrorInvalidValue;
  *e = new CUevent_st{};
  (*e)->device = cuda_emu::CurrentDevice();
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  e->recorded = true;
  e->stream = 0;
  e->seq = 0;
  cuda_emu::Submit(s, [when = e->when] { *when = std::chrono::steady_clock::now(); });
  if (cuda_emu::GetOptions().lazy_streams && !cuda_emu::IsLegacyStream(s)) {
    std::lock_guard<std::mutex> l(s->queue->mu);
    e->stream = s->id;
    e->seq = s->queue->enqueued;
  }
  return cuda_emu::StickyError();
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  cuda_emu::CensusSyncCall(cuda_emu::CensusSync::kEvent);
  if (e->stream != 0) {
    if (auto q = cuda_emu::Lookup(e->stream)) cuda_emu::DrainUpTo(*q, e->seq);
  }
  return cuda_emu::StickyError();
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream != 0) {
    if (auto q = cuda_emu::Lookup(e->stream); q && !cuda_emu::Finished(*q, e->seq)) {
      cuda_emu::DrainUpTo(*q, e->seq, /*poll_only=*/true);  // as cudaStreamQuery: progressing
      return cudaErrorNotReady;
    }
  }
  return cuda_emu::StickyError();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (ms == nullptr || a == nullptr || b == nullptr) return cudaErrorInvalidValue;
  if (!a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
  for (cudaEvent_t e : {a, b}) {
    if (e->stream == 0) continue;
    if (auto q = cuda_emu::Lookup(e->stream); q && !cuda_emu::Finished(*q, e->seq)) {
      return cudaErrorNotReady;  // a GPU refuses the time of an event not yet reached
    }
  }
  *ms = std::chrono::duration<float, std::milli>(*b->when - *a->when).count();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  cuda_emu::CensusSyncCall(cuda_emu::CensusSync::kDevice);
  cuda_emu::DrainDevice();
  return cuda_emu::StickyError();
}

}  // extern "C"
