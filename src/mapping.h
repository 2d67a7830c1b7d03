// Mapping: one read-only shared mapping of a data file, unmapped when the
// last owner (the Reader or a RecordView) lets go.
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

 private:
  Mapping(const char* data, uint64_t size) : data_(data), size_(size) {}
  const char* data_;
  uint64_t size_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_MAPPING_H_
