// Mapping: one read-only shared mapping of a data file, unmapped when the
// last owner (the Reader or a RecordView) lets go. It is guarded
// (fault_guard.h): a read past the end of a file that shrank since it was
// mapped finds zeros and marks the mapping, where it would raise SIGBUS.
#ifndef LMDBLOADER_SRC_MAPPING_H_
#define LMDBLOADER_SRC_MAPPING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

class Mapping {
 public:
  static Status Map(int fd, uint64_t length, const std::string& path, std::shared_ptr<Mapping>* out);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Whether a read reached past the end of the file since it was mapped:
  // then bytes read from the mapping since may be zeros, not the file's.
  bool shrank() const;

 private:
  Mapping(const char* data, uint64_t size, int guard) : data_(data), size_(size), guard_(guard) {}
  const char* data_;
  uint64_t size_;
  int guard_;  // fault guard handle; -1: unguarded
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_MAPPING_H_
