// Unpacking one msgpack record from untrusted bytes, with limits.
//
// A record is checked whole before anything is built from it: nesting at
// most kMaxDepth levels (the Python decoder recurses once per level), no
// container claiming more elements than the record has bytes (msgpack-cxx
// allocates a container's elements before reading them), strings that are
// valid UTF-8, map keys that can be Python dict keys (scalars: not arrays or
// maps; as msgpack-python with strict_map_key=False), no extension types, and
// no bytes after the value.
// Used by the Python decoder and `lmdbloader verify`; fuzzed by
// fuzz/msgpack_record_fuzzer.cc.
#ifndef LMDBLOADER_MSGPACK_RECORD_H_
#define LMDBLOADER_MSGPACK_RECORD_H_

#include <msgpack.hpp>

#include <cstddef>
#include <string>

namespace lmdbloader {

inline constexpr int kMaxRecordDepth = 512;

// Unpacks `data` into `out`; strings and bytes in `out` point into `data`,
// which must outlive it. False with `error` set when the bytes break a rule.
bool UnpackRecord(const char* data, size_t size, msgpack::object_handle* out, std::string* error);

}  // namespace lmdbloader

#endif  // LMDBLOADER_MSGPACK_RECORD_H_
