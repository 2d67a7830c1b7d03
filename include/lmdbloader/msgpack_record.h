// Unpacking one msgpack record from untrusted bytes, with limits.
//
// A record is checked whole before anything is built from it: nesting at
// most kMaxRecordDepth levels (the Python decoder recurses once per level),
// no container claiming more elements than the record has bytes (msgpack-cxx
// allocates a container's elements before reading them), map keys that can
// be Python dict keys (scalars: not arrays or maps; as msgpack-python with
// strict_map_key=False), no extension types, and no bytes after the value. A
// str that is not valid UTF-8 is bytes (kBytes): msgpack-python before 1.0
// packed bytes as str, as CoCLR's published LMDBs hold them.
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

// One value of an unpacked record: a small copy of its type, its scalar or
// where its bytes or children are, valid while its UnpackedRecord lives, as
// are the views it returns (they point into the record's bytes). Reading a
// value costs no call into the library; stepping to a child costs one. An
// accessor for another type than type() answers false, 0 or empty, and
// element, key or value at i >= size() a kNil value: a caller's mistake is
// never undefined behaviour.
class RecordValue {
 public:
  enum class Type {
    kNil,
    kBool,
    kUnsigned,  // a non-negative integer
    kSigned,    // a negative integer
    kFloat,     // float 32 or 64, as a double
    kString,    // UTF-8 text (checked)
    kBytes,     // msgpack bin, or a str that is not UTF-8 (bytes packed by msgpack < 1.0)
    kArray,
    kMap,
  };
  RecordValue() = default;  // kNil

  Type type() const { return type_; }
  bool boolean() const { return type_ == Type::kBool && scalar_.boolean; }         // kBool
  uint64_t unsigned_value() const { return type_ == Type::kUnsigned ? scalar_.u : 0; }  // kUnsigned
  int64_t signed_value() const { return type_ == Type::kSigned ? scalar_.i : 0; }       // kSigned
  double float_value() const { return type_ == Type::kFloat ? scalar_.f : 0; }           // kFloat
  // kString or kBytes.
  std::string_view bytes() const {
    return type_ == Type::kString || type_ == Type::kBytes ? std::string_view(scalar_.data, size_)
                                                           : std::string_view();
  }
  // kArray: its elements; kMap: its entries.
  uint32_t size() const { return type_ == Type::kArray || type_ == Type::kMap ? size_ : 0; }
  RecordValue element(uint32_t i) const;  // kArray, i < size()
  RecordValue key(uint32_t i) const;      // kMap, i < size()
  RecordValue value(uint32_t i) const;    // kMap, i < size()

 private:
  friend class UnpackedRecord;
  // The value of one of the unpacker's nodes (src/corpus/msgpack_record.cc).
  static RecordValue Of(const void* node);

  Type type_ = Type::kNil;
  uint32_t size_ = 0;  // bytes of a string or bin; elements or entries of a container
  union {
    bool boolean;
    uint64_t u;
    int64_t i;
    double f;
    const char* data;      // kString, kBytes
    const void* children;  // kArray, kMap: the unpacker's nodes
  } scalar_{};
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
