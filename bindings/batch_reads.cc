// Records into bytes objects, or straight into buffers the caller owns
// (a tensor's memory, a ring slot): one batched read, GIL released.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "held_buffer.h"
#include "positions.h"
#include "record_reads.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

py::object NewBytes(uint64_t size, char** data) {
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (!obj) throw py::error_already_set();
  *data = PyBytes_AS_STRING(obj);
  return py::reinterpret_steal<py::object>(obj);
}

py::object ReadBytes(Reader& r, const py::handle& index) {
  const uint64_t i = Position(r, index);
  uint64_t size = 0;
  ThrowIfError(r.ValueSize(i, &size));
  char* data = nullptr;
  py::object out = NewBytes(size, &data);
  Status s;
  // Releasing the GIL costs about as much as reading a small record.
  if (size >= kReleaseGilBytes) {
    py::gil_scoped_release release;
    s = r.ReadInto(i, data, size);
  } else {
    s = r.ReadInto(i, data, size);
  }
  ThrowIfError(s);
  return out;
}

py::list ReadBatchBytes(Reader& r, const py::iterable& indices) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  py::list out(pos.size());
  std::vector<char*> dsts(pos.size());
  for (size_t k = 0; k < pos.size(); ++k) out[k] = NewBytes(sizes[k], &dsts[k]);
  Status s;
  {
    py::gil_scoped_release release;
    s = r.ReadBatch(pos.data(), pos.size(), dsts.data());
  }
  ThrowIfError(s);
  return out;
}

void ReadBatchInto(Reader& r, const py::iterable& indices, const py::object& buffers, const py::object& offsets) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  std::vector<char*> dsts(pos.size());
  std::vector<HeldBuffer> held;  // keeps each buffer exported during the read
  if (offsets.is_none()) {
    py::list list = buffers.cast<py::list>();
    if (list.size() != pos.size()) ThrowInvalid("one buffer a record is needed");
    held.reserve(pos.size());
    for (size_t k = 0; k < pos.size(); ++k) {
      held.emplace_back(list[k], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS, "buffer " + std::to_string(k));
      const HeldBuffer& b = held.back();
      if (b.size() != sizes[k])
        ThrowInvalid("buffer " + std::to_string(k) + " holds " + std::to_string(b.size()) + " bytes; record " +
                     std::to_string(pos[k]) + " has " + std::to_string(sizes[k]));
      dsts[k] = b.data();
    }
  } else {
    held.emplace_back(buffers, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS, "buffers");
    const HeldBuffer& b = held.back();
    const uint64_t capacity = b.size();
    std::vector<uint64_t> at = offsets.cast<std::vector<uint64_t>>();
    if (at.size() != pos.size()) ThrowInvalid("one offset a record is needed");
    for (size_t k = 0; k < pos.size(); ++k) {
      if (at[k] > capacity || sizes[k] > capacity - at[k])
        ThrowInvalid("record " + std::to_string(pos[k]) + " (" + std::to_string(sizes[k]) +
                     " bytes at offset " + std::to_string(at[k]) + ") does not fit a buffer of " +
                     std::to_string(capacity) + " bytes");
      dsts[k] = b.data() + at[k];
    }
  }
  Status s;
  {
    py::gil_scoped_release release;
    s = r.ReadBatch(pos.data(), pos.size(), dsts.data());
  }
  ThrowIfError(s);
}

}  // namespace lmdbloader
