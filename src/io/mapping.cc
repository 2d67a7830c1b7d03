#include "io/mapping.h"

#include <sys/mman.h>

#include <cerrno>

#include "io/fault_guard.h"

namespace lmdbloader {

Status Mapping::Map(int fd, uint64_t length, const std::string& path, std::shared_ptr<Mapping>* out) {
  if (length == 0) {
    out->reset(new Mapping(nullptr, 0, -1));
    return Status::OK();
  }
  void* p = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap", path);
  // Records are read in random order: no readahead into the map.
  ::madvise(p, length, MADV_RANDOM);
  out->reset(new Mapping(static_cast<const char*>(p), length, GuardMapping(p, length)));
  return Status::OK();
}

bool Mapping::shrank() const { return MappingShrank(guard_); }

Mapping::~Mapping() {
  UnguardMapping(guard_);
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace lmdbloader
