#include "io/batch_io.h"

#include <liburing.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "io/quiet_thread.h"

namespace lmdbloader {

namespace {

// io_uring reads take a 32-bit length; larger records are read in pieces.
constexpr uint64_t kMaxPiece = 1ull << 30;

Status EndOfFile(const ReadRequest& r, uint64_t at) {
  return Status::Corruption("pread " + *r.path + ": unexpected end of file at offset " + std::to_string(at) +
                            " (was the file truncated?)")
      .WithReason(Status::Reason::kShortRead);
}

Status ReadError(const ReadRequest& r, int err) { return Status::FromErrno(err, "pread", *r.path); }

// The first failure of a batch in request order: the one a caller would have
// met reading the records one after another.
class FirstError {
 public:
  void Note(size_t index, Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index < index_) {
      index_ = index;
      status_ = std::move(s);
    }
  }
  bool any() const { return failed_.load(std::memory_order_relaxed); }
  void Mark() { failed_.store(true, std::memory_order_relaxed); }
  Status Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  size_t index_ = SIZE_MAX;
  Status status_;
  std::atomic<bool> failed_{false};
};

class SyncBatchIo final : public BatchIo {
 public:
  IoEngine kind() const override { return IoEngine::kSync; }
  Status ReadAll(const ReadRequest* requests, size_t count) override {
    for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(PreadFully(requests[k]));
    return Status::OK();
  }
};

// Up to queue_depth reads at once: the calling thread and up to
// queue_depth - 1 pool threads (kMaxHelpers at most) claim requests from a
// shared counter.
//
// What the page cache already holds is read first, in the calling thread,
// with preadv2(RWF_NOWAIT), which copies cached bytes and returns EAGAIN
// instead of waiting for the device. Only the rest goes to the pool, and only
// as many helpers are woken as there are reads left. Handing every read of a
// warm batch to the pool measured 2.7x slower than plain pread() for 100 KiB
// records (waking 32 threads on 2 cores for each chunk of 2-3 reads); io_uring
// makes the same nonblocking attempt itself before it queues a read.
class ThreadPoolBatchIo final : public BatchIo {
 public:
  // Idle threads cost little, but each DataLoader worker holds its own pool.
  static constexpr uint32_t kMaxHelpers = 32;
  explicit ThreadPoolBatchIo(uint32_t queue_depth)
      : helpers_wanted_(std::min<uint32_t>(queue_depth - 1, kMaxHelpers)) {}

  ~ThreadPoolBatchIo() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  IoEngine kind() const override { return IoEngine::kThreads; }

  Status ReadAll(const ReadRequest* requests, size_t count) override {
    if (count <= 1 || helpers_wanted_ == 0) {
      for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(PreadFully(requests[k]));
      return Status::OK();
    }
    Job job;
    for (size_t k = 0; k < count; ++k) {
      ReadRequest rest = requests[k];
      if (!ReadCached(&rest)) {
        job.requests.push_back(rest);
        job.order.push_back(k);
      }
    }
    if (job.requests.empty()) return Status::OK();
    if (job.requests.size() == 1) return PreadFully(job.requests[0]);
    const size_t helpers = std::min<size_t>(job.requests.size() - 1, helpers_wanted_);
    {
      std::unique_lock<std::mutex> lock(mu_);
      StartThreadsLocked();
      jobs_.push_back(&job);
    }
    for (size_t h = 0; h < helpers; ++h) work_cv_.notify_one();
    Work(&job);
    {
      // Every request is claimed once the caller's own loop ends; a helper
      // that claimed one still holds the job until it finishes that read.
      std::unique_lock<std::mutex> lock(mu_);
      auto it = std::find(jobs_.begin(), jobs_.end(), &job);
      if (it != jobs_.end()) jobs_.erase(it);
      done_cv_.wait(lock, [&] { return job.helpers == 0; });
    }
    return job.error.any() ? job.error.Take() : Status::OK();
  }

 private:
  struct Job {
    std::vector<ReadRequest> requests;  // what the page cache did not hold
    std::vector<size_t> order;          // each one's place in the batch, for FirstError
    std::atomic<size_t> next{0};
    int helpers = 0;  // guarded by mu_
    FirstError error;
  };

  // Copies what the page cache holds of `*r` without waiting for the device;
  // true when all of it was there. Otherwise `*r` is narrowed to the bytes
  // still missing, and any failure is left for PreadFully to meet and name.
  bool ReadCached(ReadRequest* r) {
    if (!nowait_.load(std::memory_order_relaxed)) return false;
    while (r->size > 0) {
      iovec iov{r->dst, static_cast<size_t>(std::min<uint64_t>(r->size, kMaxPiece))};
      const ssize_t n = ::preadv2(r->fd, &iov, 1, static_cast<off_t>(r->offset), RWF_NOWAIT);
      if (n <= 0) {
        // EOPNOTSUPP/EINVAL: a kernel or file system without RWF_NOWAIT for
        // buffered reads; the pool reads everything from then on.
        if (n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) nowait_.store(false, std::memory_order_relaxed);
        return false;
      }
      r->dst += n;
      r->offset += static_cast<uint64_t>(n);
      r->size -= static_cast<uint64_t>(n);
    }
    return true;
  }

  static void Work(Job* job) {
    for (size_t k; (k = job->next.fetch_add(1)) < job->requests.size();) {
      if (job->error.any()) continue;  // stop reading after a failure
      Status s = PreadFully(job->requests[k]);
      if (!s.ok()) {
        job->error.Note(job->order[k], std::move(s));
        job->error.Mark();
      }
    }
  }

  void StartThreadsLocked() {
    while (threads_.size() < helpers_wanted_) threads_.push_back(StartQuietThread([this] { Loop(); }));
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      Job* job = jobs_.front();
      if (job->next.load() >= job->requests.size()) {
        jobs_.pop_front();  // fully claimed: nothing left for anyone
        continue;
      }
      ++job->helpers;
      lock.unlock();
      Work(job);
      lock.lock();
      if (--job->helpers == 0) done_cv_.notify_all();
    }
  }

  const uint32_t helpers_wanted_;
  std::atomic<bool> nowait_{true};
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job*> jobs_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

// The io_uring rings of this process, shared by every reader and kept until
// the process exits.
//
// Why rings are never released while the process runs: releasing a ring
// makes the kernel queue a notification on every thread that ever submitted
// to it (io_uring's io_ring_exit_work adds task_work with TWA_SIGNAL, which
// raises TIF_NOTIFY_SIGNAL), and that notification ends the thread's next
// blocking system call early, as a signal would: a pipe write that had
// written 64 KiB returns short, and Python's unbuffered print drops the
// rest. The release runs on a kernel work queue a moment after the close, so
// it lands in whatever the caller does next. Seen: every one of 40 runs that
// closed a Reader and then wrote 136,000 bytes into a pipe drained later
// wrote 65,536. Kept rings cost one descriptor (close-on-exec) and a few
// pages each, one per thread reading at once and queue depth; at exit the
// kernel takes each thread off its rings before releasing them, so nobody
// is notified.
//
// After fork() the child finds the parent's rings in its copy of the pool:
// it closes its copies (the parent still holds the rings, so they are not
// released) and sets up its own. The fork handlers keep the pool's lock
// usable in the child and mark what it holds as the parent's; rings that
// other threads held at the fork are not in the pool, and never come back.
//
// A caller may close descriptors it does not own (closerange before a
// daemon's work) and open its own files under the same numbers. A ring
// whose descriptor no longer has the device and inode it had (each ring has
// its own inode on recent kernels; older ones share one among all io_uring
// files, where the check is "still an io_uring") is therefore left alone,
// never closed or used: still mapped, so the kernel does not release it
// (and notify) while the process runs.
struct PooledRing {
  io_uring ring;
  bool identified = false;  // dev and ino were read at creation
  dev_t dev = 0;
  ino_t ino = 0;

  bool StillOurs() const {
    struct stat st;
    if (::fstat(ring.ring_fd, &st) != 0) return false;
    return !identified || (st.st_dev == dev && st.st_ino == ino);
  }
};

class RingPool {
 public:
  static RingPool& Get() {
    static RingPool* pool = [] {
      auto* p = new RingPool();  // never deleted: see above
      ::pthread_atfork([] { Get().mu_.lock(); }, [] { Get().mu_.unlock(); },
                       [] {
                         Get().inherited_ = true;
                         Get().mu_.unlock();
                       });
      return p;
    }();
    return *pool;
  }

  // A ring of `entries` entries, for one thread's use until Give.
  Status Take(uint32_t entries, std::unique_ptr<PooledRing>* out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ForgetParentsRings();
      auto& free = free_[entries];
      while (!free.empty()) {
        std::unique_ptr<PooledRing> ring = std::move(free.back());
        free.pop_back();
        if (ring->StillOurs()) {
          *out = std::move(ring);
          return Status::OK();
        }
        ring.release();  // see above: left mapped, never used again
      }
    }
    auto ring = std::make_unique<PooledRing>();
    // COOP_TASKRUN (Linux 5.19) saves an interrupt per completion; older
    // kernels refuse the flag, and get a plain ring. (DEFER_TASKRUN and
    // SINGLE_ISSUER would tie a ring to one thread; readers share rings.)
    int rc = io_uring_queue_init(entries, &ring->ring, IORING_SETUP_COOP_TASKRUN);
    if (rc == -EINVAL) rc = io_uring_queue_init(entries, &ring->ring, 0);
    if (rc < 0) return Status::FromErrno(-rc, "io_uring_queue_init", "io_uring");
    struct stat st;
    if (::fstat(ring->ring.ring_fd, &st) == 0) {
      ring->identified = true;
      ring->dev = st.st_dev;
      ring->ino = st.st_ino;
    }
    *out = std::move(ring);
    return Status::OK();
  }

  void Give(uint32_t entries, std::unique_ptr<PooledRing> ring) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[entries].push_back(std::move(ring));
  }

 private:
  RingPool() = default;

  void ForgetParentsRings() {
    if (!inherited_) return;
    for (auto& [entries, rings] : free_)
      for (auto& ring : rings) {
        if (ring->StillOurs()) {
          io_uring_queue_exit(&ring->ring);  // this process's copy only
        } else {
          ring.release();  // the number is the caller's now: left alone
        }
      }
    free_.clear();
    inherited_ = false;
  }

  std::mutex mu_;
  bool inherited_ = false;  // the rings in free_ are the parent's (set in a forked child)
  std::map<uint32_t, std::vector<std::unique_ptr<PooledRing>>> free_;
};

// Reads through rings of the process-wide pool: a ring serves one thread at
// a time, taken for a batch and given back after it.
class UringBatchIo final : public BatchIo {
 public:
  explicit UringBatchIo(uint32_t queue_depth) : queue_depth_(queue_depth) {}

  // Takes one ring, which also tells whether the kernel allows io_uring.
  Status Probe() {
    std::unique_ptr<PooledRing> ring;
    LMDBLOADER_RETURN_IF_ERROR(RingPool::Get().Take(queue_depth_, &ring));
    RingPool::Get().Give(queue_depth_, std::move(ring));
    return Status::OK();
  }

  IoEngine kind() const override { return IoEngine::kIoUring; }

  Status ReadAll(const ReadRequest* requests, size_t count) override {
    if (count == 1) return PreadFully(requests[0]);
    std::unique_ptr<PooledRing> ring;
    LMDBLOADER_RETURN_IF_ERROR(RingPool::Get().Take(queue_depth_, &ring));
    Status s = Run(&ring->ring, requests, count);
    RingPool::Get().Give(queue_depth_, std::move(ring));
    return s;
  }

 private:
  Status Run(io_uring* ring, const ReadRequest* requests, size_t count) {
    std::vector<uint64_t> done(count, 0);
    std::vector<size_t> resubmit;  // short or interrupted reads to continue
    FirstError error;
    size_t next = 0, in_flight = 0, finished = 0;
    while (finished < count) {
      // Fill the ring; after a failure only wait for what is in flight.
      while (in_flight < queue_depth_ && !error.any() && (!resubmit.empty() || next < count)) {
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (!sqe) break;
        size_t k;
        if (!resubmit.empty()) {
          k = resubmit.back();
          resubmit.pop_back();
        } else {
          k = next++;
        }
        const ReadRequest& r = requests[k];
        if (r.size == 0) {  // nothing to read; completes at once
          io_uring_prep_nop(sqe);
        } else {
          const uint64_t piece = std::min(r.size - done[k], kMaxPiece);
          io_uring_prep_read(sqe, r.fd, r.dst + done[k], static_cast<unsigned>(piece), r.offset + done[k]);
        }
        sqe->user_data = k;
        ++in_flight;
      }
      if (in_flight == 0) break;  // a failure stopped submission and all came back
      int rc = io_uring_submit_and_wait(ring, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        // The ring itself failed; the reads already in flight must still be
        // reaped before their buffers go back to the caller.
        Status s = Status::FromErrno(-rc, "io_uring_submit", *requests[0].path);
        DrainAfterFailure(ring, in_flight);
        return s;
      }
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        --in_flight;
        const size_t k = static_cast<size_t>(cqe->user_data);
        const ReadRequest& r = requests[k];
        const int res = cqe->res;
        if (r.size == 0) {
          ++finished;
        } else if (res == -EAGAIN || res == -EINTR) {
          resubmit.push_back(k);
        } else if (res < 0) {
          error.Note(k, ReadError(r, -res));
          error.Mark();
          ++finished;
        } else if (res == 0) {
          error.Note(k, EndOfFile(r, r.offset + done[k]));
          error.Mark();
          ++finished;
        } else {
          done[k] += static_cast<uint64_t>(res);
          if (done[k] < r.size) resubmit.push_back(k);
          else ++finished;
        }
      }
      io_uring_cq_advance(ring, seen);
    }
    return error.any() ? error.Take() : Status::OK();
  }

  static void DrainAfterFailure(io_uring* ring, size_t in_flight) {
    while (in_flight > 0) {
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) return;  // nothing more can be learnt from this ring
      io_uring_cqe_seen(ring, cqe);
      --in_flight;
    }
  }

  const uint32_t queue_depth_;
};

}  // namespace

Status PreadFully(const ReadRequest& r) {
  uint64_t done = 0;
  while (done < r.size) {
    ssize_t n = ::pread(r.fd, r.dst + done, r.size - done, static_cast<off_t>(r.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ReadError(r, errno);
    }
    if (n == 0) return EndOfFile(r, r.offset + done);
    done += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

Status BatchIo::Create(IoEngine requested, uint32_t queue_depth, std::unique_ptr<BatchIo>* out,
                       std::string* fallback_reason) {
  fallback_reason->clear();
  if (queue_depth <= 1 || requested == IoEngine::kSync) {
    *out = std::make_unique<SyncBatchIo>();
    return Status::OK();
  }
  if (requested == IoEngine::kThreads) {
    *out = std::make_unique<ThreadPoolBatchIo>(queue_depth);
    return Status::OK();
  }
  // LMDBLOADER_DISABLE_IO_URING=1 behaves like a sandbox that blocks
  // io_uring (seccomp): for trying the fallback where io_uring works.
  const char* disabled = std::getenv("LMDBLOADER_DISABLE_IO_URING");
  Status probed = disabled && *disabled && std::strcmp(disabled, "0") != 0
                      ? Status::IOError("io_uring disabled by LMDBLOADER_DISABLE_IO_URING")
                      : Status::OK();
  auto uring = std::make_unique<UringBatchIo>(queue_depth);
  if (probed.ok()) probed = uring->Probe();
  if (probed.ok()) {
    *out = std::move(uring);
    return Status::OK();
  }
  if (requested == IoEngine::kIoUring)
    return Status::IOError("io_engine io_uring is not available: " + probed.message());
  *fallback_reason = probed.message();
  *out = std::make_unique<ThreadPoolBatchIo>(queue_depth);
  return Status::OK();
}

}  // namespace lmdbloader
