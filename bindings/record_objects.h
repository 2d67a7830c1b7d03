// msgpack records to Python objects: the decoder behind Reader.decode and
// decode_batch. The record's bytes are untrusted: UnpackRecord
// (lmdbloader/msgpack_record.h) checks them against its limits first.
#ifndef LMDBLOADER_BINDINGS_RECORD_OBJECTS_H_
#define LMDBLOADER_BINDINGS_RECORD_OBJECTS_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

#include "lmdbloader/msgpack_record.h"
#include "lmdbloader/reader.h"

namespace lmdbloader {

// Record `index` of `r` (its `size` bytes at `data`) as Python objects: maps
// to dicts, arrays to lists, bin to bytes, str to str, numbers, None. A
// record that does not decode raises lmdbloader.DecodeError naming the record
// and the file.
// One unpacked value as Python objects, as DecodeRecord gives them.
pybind11::object RecordValueToPython(const RecordValue& v);

pybind11::object DecodeRecord(const Reader& r, uint64_t index, const char* data, size_t size);

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_RECORD_OBJECTS_H_
