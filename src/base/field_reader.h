// Reads fixed-width fields off untrusted bytes (saved index headers, saved
// file set listings): each read checks what is left first and, when too
// little is, fails and moves nothing. Fields are host-endian, as written.
#ifndef LMDBLOADER_SRC_BASE_FIELD_READER_H_
#define LMDBLOADER_SRC_BASE_FIELD_READER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lmdbloader {

class FieldReader {
 public:
  explicit FieldReader(std::string_view bytes, size_t at = 0) : bytes_(bytes), at_(at > bytes.size() ? bytes.size() : at) {}

  template <typename T>
  bool Get(T* v) {
    if (left() < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // The next n bytes, as a view into the bytes read (or copied).
  bool GetView(std::string_view* s, uint64_t n) {
    if (left() < n) return false;
    *s = bytes_.substr(at_, n);
    at_ += n;
    return true;
  }
  bool GetBytes(std::string* s, uint64_t n) {
    std::string_view v;
    if (!GetView(&v, n)) return false;
    s->assign(v);
    return true;
  }
  // A u64 length, then that many bytes (the length is consumed only with them).
  bool GetString(std::string_view* s) {
    uint64_t n = 0;
    const size_t start = at_;
    if (Get(&n) && GetView(s, n)) return true;
    at_ = start;
    return false;
  }
  size_t left() const { return bytes_.size() - at_; }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t at_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_BASE_FIELD_READER_H_
