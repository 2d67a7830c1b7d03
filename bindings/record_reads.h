// The reading methods of _core.Reader: records into bytes or into buffers
// the caller owns (batch_reads.cc), and records decoded or handed to a
// function a cache-sized chunk at a time (decode_loops.cc). Batches, and
// single records of kReleaseGilBytes or more, are read with the GIL released
// (a smaller one reads faster than the release costs); errors go through
// the module's translator.
#ifndef LMDBLOADER_BINDINGS_RECORD_READS_H_
#define LMDBLOADER_BINDINGS_RECORD_READS_H_

#include <pybind11/pybind11.h>

#include <cstdint>

#include "lmdbloader/reader.h"

namespace lmdbloader {

// Reading or checking a record this large (its checksum: about 4 us) is worth
// more than releasing and taking the GIL back (well under 1 us).
inline constexpr uint64_t kReleaseGilBytes = 64u << 10;

// An uninitialized bytes object of `size` bytes, to be read into at *data.
pybind11::object NewBytes(uint64_t size, char** data);

// ---- batch_reads.cc

// Record `index` (any Python integer) as a new bytes object.
pybind11::object ReadBytes(Reader& r, const pybind11::handle& index);
// Records at `indices` as bytes objects, read in one batch.
pybind11::list ReadBatchBytes(Reader& r, const pybind11::iterable& indices);
// Reads record indices[k] to `buffers` at offsets[k] (one writable buffer: a
// ring slot, or a tensor's memory), or into buffers[k] when `offsets` is
// None (a list of writable buffers, one a record, each of its record's
// size). Checksums are checked in place. Bounds are checked (ValueError)
// before anything is read.
void ReadBatchInto(Reader& r, const pybind11::iterable& indices, const pybind11::object& buffers,
                   const pybind11::object& offsets);

// ---- decode_loops.cc

// Record `index` decoded from msgpack (record_objects.h).
pybind11::object DecodeOne(Reader& r, const pybind11::handle& index);
// Records at `indices` decoded from msgpack, `transform` (or None) applied
// to each as soon as it is decoded.
pybind11::list DecodeBatch(Reader& r, const pybind11::iterable& indices, const pybind11::object& transform);
// fn(bytes) of each record, read a chunk at a time.
pybind11::list ApplyBatch(Reader& r, const pybind11::iterable& indices, const pybind11::object& fn);
// fn(memoryview) of each record, zero-copy (mode=mmap).
pybind11::list ApplyBatchViews(Reader& r, const pybind11::iterable& indices, const pybind11::object& fn);

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_RECORD_READS_H_
