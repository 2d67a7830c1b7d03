// Memory probes: what the kernel counts for a process, read from /proc.
//
// Which number matters depends on who is counting. RSS counts every resident
// page a process maps, including shared file pages, so summing RSS over the
// workers of a job (what SLURM's jobacct_gather/linux does) counts a shared
// page once per worker. PSS divides each shared page among the processes that
// map it, so PSS sums to the real total. USS counts only pages no other
// process maps: what exiting the process would free.
//
// Thread safety: the free functions are safe from any thread. A StatmProbe is
// used by one thread at a time.
#ifndef LMDBLOADER_MEMORY_H_
#define LMDBLOADER_MEMORY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// From /proc/<pid>/smaps_rollup. Costs microseconds with little mapped, up to
// tens of milliseconds with gigabytes mapped: never call it per record.
struct ProcessMemory {
  uint64_t rss = 0;     // resident set (bytes)
  uint64_t pss = 0;     // proportional set
  uint64_t uss = 0;     // Private_Clean + Private_Dirty
  uint64_t shared = 0;  // Shared_Clean + Shared_Dirty
  uint64_t file_rss = 0;  // resident file-backed pages (from /proc/<pid>/status RssFile)
  // Resident shared memory: memfd, /dev/shm, batch rings (status RssShmem).
  uint64_t shmem_rss = 0;
};

// pid 0 means the calling process.
Status ReadProcessMemory(pid_t pid, ProcessMemory* memory);

// Resident bytes of the mappings of `path` in process `pid` (summed over
// /proc/<pid>/smaps entries whose file is `path`). Same cost as above.
Status MappedFileRss(pid_t pid, const std::string& path, uint64_t* rss);

// Bytes of file data the page cache could hold for this process: the
// kernel's MemAvailable (/proc/meminfo), lowered to the memory limit of the
// process's cgroup (v2 memory.max, as SLURM and containers set it) when that
// is smaller. 0 when neither can be read.
uint64_t PageCacheRoom();

// The cheap probe for hot paths: /proc/self/statm through a kept descriptor,
// about half a microsecond a read. Open it in the process it measures: a
// descriptor opened before fork() keeps reading the parent.
class StatmProbe {
 public:
  StatmProbe() = default;
  ~StatmProbe();
  StatmProbe(const StatmProbe&) = delete;
  StatmProbe& operator=(const StatmProbe&) = delete;

  Status Open();  // (re)opens /proc/self/statm for the calling process
  // Total resident bytes and resident file-backed + shmem bytes.
  Status Read(uint64_t* rss, uint64_t* file_rss);

 private:
  int fd_ = -1;
  long page_size_ = 4096;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_MEMORY_H_
