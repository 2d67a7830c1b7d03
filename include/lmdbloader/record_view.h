// RecordView: a zero-copy view of one record's bytes inside a mapping of the
// data file (Reader in mmap mode).
//
// The view owns a reference to the mapping it points into, so the bytes stay
// valid for the view's whole life: a remap, a release of pages by the memory
// governor (pages refault from the page cache) or closing the Reader never
// invalidates a live view. Copying a view is cheap (one shared_ptr).
// The bytes are only 2-byte aligned (an LMDB guarantee): copy them with memcpy
// before reading them as wider types.
#ifndef LMDBLOADER_RECORD_VIEW_H_
#define LMDBLOADER_RECORD_VIEW_H_

#include <cstddef>
#include <memory>
#include <string_view>

namespace lmdbloader {

class RecordView {
 public:
  RecordView() = default;
  RecordView(const char* data, size_t size, std::shared_ptr<const void> pin)
      : data_(data), size_(size), pin_(std::move(pin)) {}

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view bytes() const { return std::string_view(data_, size_); }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> pin_;  // keeps the mapping alive
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_RECORD_VIEW_H_
