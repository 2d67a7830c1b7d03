// Caffe Datum records to Python (lmdbloader/caffe_datum.h): argument
// conversion only. `data` comes back as a memoryview of the record's own
// buffer (no copy), which keeps the record alive.
#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <vector>

#include "held_buffer.h"
#include "lmdbloader/caffe_datum.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

// The part of `record` that `data` views, as a memoryview of bytes.
py::object DataView(const py::handle& record, const HeldBuffer& held, std::string_view data) {
  py::object whole = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(record.ptr()));
  if (!whole) throw py::error_already_set();
  whole = whole.attr("cast")("B");  // one byte an item, whatever the buffer's format and shape
  const size_t begin = data.empty() ? 0 : static_cast<size_t>(data.data() - held.bytes().data());
  return whole[py::slice(static_cast<py::ssize_t>(begin), static_cast<py::ssize_t>(begin + data.size()), 1)];
}

py::tuple DatumTuple(const py::handle& record, const HeldBuffer& held, const CaffeDatum& d) {
  return py::make_tuple(d.channels, d.height, d.width, DataView(record, held, d.data),
                        d.has_label ? py::object(py::int_(d.label)) : py::object(py::none()), d.encoded);
}

py::tuple ParseOne(const py::object& record) {
  HeldBuffer held(record, PyBUF_C_CONTIGUOUS, "a record");
  CaffeDatum d;
  ThrowIfError(WithoutGil([&] { return ParseCaffeDatum(held.bytes(), &d); }));
  return DatumTuple(record, held, d);
}

// One call a batch: every record parsed with the GIL released; the first bad
// one is the error (its position in batch_index).
py::list ParseBatch(const py::sequence& records) {
  const size_t n = py::len(records);
  std::vector<py::object> objects;
  std::vector<HeldBuffer> held;
  objects.reserve(n);
  held.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    objects.push_back(records[i]);
    held.emplace_back(objects.back(), PyBUF_C_CONTIGUOUS, "a record");
  }
  std::vector<CaffeDatum> datums(n);
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < n && s.ok(); ++i) {
      s = ParseCaffeDatum(held[i].bytes(), &datums[i]);
      if (!s.ok())
        s = s.WithPrefix("record " + std::to_string(i) + " of the batch: ")
                .WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i));
    }
  }
  ThrowIfError(s);
  py::list out(n);
  for (size_t i = 0; i < n; ++i) out[i] = DatumTuple(objects[i], held[i], datums[i]);
  return out;
}

}  // namespace

void RegisterDatum(py::module_& m) {
  m.def("caffe_datum", &ParseOne, py::arg("record"),
        "A Caffe Datum's (channels, height, width, data, label, encoded): data a memoryview into record, label "
        "None when the record has none. DecodeError for bytes that are not a valid Datum "
        "(include/lmdbloader/caffe_datum.h lists the rules).");
  m.def("caffe_datums", &ParseBatch, py::arg("records"),
        "caffe_datum of each record, in one call with the GIL released; the first bad record raises "
        "DecodeError with its batch_index.");
}

}  // namespace lmdbloader
