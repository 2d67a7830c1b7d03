// Unpacking one msgpack record from untrusted bytes, with limits.
//
// A record is checked whole before anything is built from it: nesting at
// most kMaxRecordDepth levels (the Python decoder recurses once per level),
// no container claiming more elements than the record has bytes (msgpack-cxx
// allocates a container's elements before reading them), strings that are
// valid UTF-8, map keys that can be Python dict keys (scalars: not arrays or
// maps; as msgpack-python with strict_map_key=False), no extension types, and
// no bytes after the value.
// Used by the Python decoder and `lmdbloader verify`; fuzzed by
// fuzz/msgpack_record_fuzzer.cc. The unpacker (msgpack-cxx) stays inside the
// library: this header names none of its types.
#ifndef LMDBLOADER_MSGPACK_RECORD_H_
#define LMDBLOADER_MSGPACK_RECORD_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

inline constexpr int kMaxRecordDepth = 512;

class UnpackedRecord;

// One value of an unpacked record: a small handle into its UnpackedRecord,
// valid while that record lives, as are the views it returns (they point
// into the record's bytes). Cheap to copy. An accessor for another type than
// type() answers false, 0 or empty, and element, key or value at i >= size()
// a kNil value: a caller's mistake is never undefined behaviour.
class RecordValue {
 public:
  enum class Type {
    kNil,
    kBool,
    kUnsigned,  // a non-negative integer
    kSigned,    // a negative integer
    kFloat,     // float 32 or 64, as a double
    kString,    // UTF-8 text (checked)
    kBytes,     // msgpack bin
    kArray,
    kMap,
  };
  Type type() const;
  bool boolean() const;             // kBool
  uint64_t unsigned_value() const;  // kUnsigned
  int64_t signed_value() const;     // kSigned
  double float_value() const;       // kFloat
  std::string_view bytes() const;   // kString or kBytes
  uint32_t size() const;            // kArray: its elements; kMap: its entries
  RecordValue element(uint32_t i) const;  // kArray, i < size()
  RecordValue key(uint32_t i) const;      // kMap, i < size()
  RecordValue value(uint32_t i) const;    // kMap, i < size()

 private:
  friend class UnpackedRecord;
  explicit RecordValue(const void* object) : object_(object) {}
  const void* object_;  // the unpacker's own node, inside an UnpackedRecord
};

// A record unpacked by UnpackRecord. Move-only; its strings and bytes point
// into the bytes it was unpacked from, which must outlive it. Its const
// methods, and its values', may be called from many threads at once.
class UnpackedRecord {
 public:
  UnpackedRecord();
  ~UnpackedRecord();
  UnpackedRecord(UnpackedRecord&&) noexcept;
  UnpackedRecord& operator=(UnpackedRecord&&) noexcept;

  // The record's value (kNil before a successful UnpackRecord).
  RecordValue root() const;

 private:
  friend Status UnpackRecord(std::string_view data, UnpackedRecord* out);
  struct Rep;  // the unpacker's tree (src/corpus/msgpack_record.cc)
  std::unique_ptr<Rep> rep_;
};

// Unpacks `data` into `out`. DecodeError saying which rule the bytes break
// ("nested deeper than 512 levels", "a string is not valid UTF-8", "3 bytes
// follow the msgpack value", ...); the caller adds which record it was.
Status UnpackRecord(std::string_view data, UnpackedRecord* out);

}  // namespace lmdbloader

#endif  // LMDBLOADER_MSGPACK_RECORD_H_
