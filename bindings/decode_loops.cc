// Records decoded (msgpack) or handed to a Python function a cache-sized
// chunk at a time, the reads of a chunk in flight together.
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "positions.h"
#include "record_objects.h"
#include "record_reads.h"
#include "scratch_buffer.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

// Records are read and decoded a cache-sized chunk at a time: reading a whole
// batch first and decoding it afterwards measured 0.6x of per-record speed,
// because by the time a record is decoded its bytes have left the CPU cache.
// `transform` (or None) is applied to each record as soon as it is decoded,
// so only one decoded record of the batch exists untransformed at a time.
constexpr uint64_t kDecodeChunkBytes = 256u << 10;

// End of the chunk of records starting at `first`: up to kDecodeChunkBytes,
// at least one record. `*total` gets the chunk's bytes.
size_t ChunkEnd(const std::vector<uint64_t>& sizes, size_t first, uint64_t* total) {
  size_t end = first;
  *total = 0;
  while (end < sizes.size() && (end == first || *total + sizes[end] <= kDecodeChunkBytes)) *total += sizes[end++];
  return end;
}

// fn(arg) for one record. An exception fn raises goes on unchanged, with a
// note (PEP 678, Python 3.11+) naming the record and file: a DataLoader
// re-raises a worker's exception as text, where a user's decode error would
// otherwise not say which record of which file it met.
py::object CallForRecord(const py::object& fn, py::object arg, const Reader& r, uint64_t index) {
  try {
    return fn(std::move(arg));
  } catch (py::error_already_set& e) {
    py::object exc = e.value();
    if (exc && py::hasattr(exc, "add_note"))
      exc.attr("add_note")("lmdbloader: raised on record " + std::to_string(index) + " of " + r.path());
    throw;
  }
}

}  // namespace

py::object DecodeOne(Reader& r, const py::handle& index) {
  const uint64_t pos = Position(r, index);
  uint64_t size = 0;
  ThrowIfError(r.ValueSize(pos, &size));
  ScratchBuffer buf(size);
  Status s;
  {
    py::gil_scoped_release release;
    s = r.ReadInto(pos, buf.data(), size);
  }
  ThrowIfError(s);
  return DecodeRecord(r, pos, buf.data(), size);
}

py::list DecodeBatch(Reader& r, const py::iterable& indices, const py::object& transform) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  py::list out(pos.size());
  std::vector<char*> dsts;
  for (size_t first = 0; first < pos.size();) {
    uint64_t total = 0;
    const size_t end = ChunkEnd(sizes, first, &total);
    ScratchBuffer buf(total);
    dsts.clear();
    for (size_t k = first, at = 0; k < end; at += sizes[k], ++k) dsts.push_back(buf.data() + at);
    Status s;
    {
      py::gil_scoped_release release;
      s = r.ReadBatch(pos.data() + first, end - first, dsts.data());
    }
    ThrowIfError(s);
    for (size_t k = first; k < end; ++k) {
      py::object record = DecodeRecord(r, pos[k], dsts[k - first], sizes[k]);
      out[k] = transform.is_none() ? record : CallForRecord(transform, std::move(record), r, pos[k]);
    }
    first = end;
  }
  return out;
}

// fn(bytes) of each record, read a chunk at a time (one ReadBatch, reads in
// flight together) and each record's bytes dropped as soon as fn returns.
// Holding a whole batch of large records at once instead measured 5x slower
// for 1 MiB records: the allocator returns the freed batch to the kernel and
// every record's pages fault in again (about 255 faults a MiB).
py::list ApplyBatch(Reader& r, const py::iterable& indices, const py::object& fn) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  py::list out(pos.size());
  std::vector<py::object> chunk;
  std::vector<char*> dsts;
  for (size_t first = 0; first < pos.size();) {
    uint64_t total = 0;
    const size_t end = ChunkEnd(sizes, first, &total);
    chunk.clear();
    dsts.clear();
    for (size_t k = first; k < end; ++k) {
      dsts.push_back(nullptr);
      chunk.push_back(NewBytes(sizes[k], &dsts.back()));
    }
    Status s;
    {
      py::gil_scoped_release release;
      s = r.ReadBatch(pos.data() + first, end - first, dsts.data());
    }
    ThrowIfError(s);
    for (size_t k = first; k < end; ++k) {
      out[k] = CallForRecord(fn, std::move(chunk[k - first]), r, pos[k]);
    }
    first = end;
  }
  return out;
}

// fn(view) of each record, zero-copy (mode=mmap): the batch's pages are
// prefetched together, then each record is checked (checksum) in the mapping
// and handed at once to fn as a read-only memoryview. No copy is made:
// against a copy out of the page cache (pread or memcpy) this saves one pass
// over the record's bytes, which for large records is most of the work
// (bench/cold_bench.py --views-only). One record at a time, so that fn's touches are
// counted by the governor at the next record and the bytes are still in the
// CPU cache when fn reads them. A view stays valid as long as it is
// referenced (it keeps its mapping).
py::list ApplyBatchViews(Reader& r, const py::iterable& indices, const py::object& fn) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  {
    py::gil_scoped_release release;
    r.Prefetch(pos.data(), pos.size());
  }
  py::list out(pos.size());
  for (size_t k = 0; k < pos.size(); ++k) {
    RecordView view;
    Status s;
    if (sizes[k] >= kReleaseGilBytes) {
      py::gil_scoped_release release;
      s = r.View(pos[k], &view);
    } else {
      s = r.View(pos[k], &view);
    }
    ThrowIfError(s);
    py::object holder = py::cast(std::move(view));
    PyObject* mv = PyMemoryView_FromObject(holder.ptr());
    if (!mv) throw py::error_already_set();
    out[k] = CallForRecord(fn, py::reinterpret_steal<py::object>(mv), r, pos[k]);
    // fn read the mapping: zeros, not the file's bytes, if the file shrank meanwhile.
    ThrowIfError(r.CheckMappings());
  }
  return out;
}

}  // namespace lmdbloader
