// _core.Reader (lmdbloader/reader.h to Python), its options list and
// _core.RecordView. The reading methods themselves are in batch_reads.cc and
// decode_loops.cc; this binds them, converts arguments and reports stats.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/reader.h"
#include "positions.h"
#include "record_reads.h"
#include "report_dicts.h"
#include "option_rows.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

// Options by name as text (ReaderOptionList): the library parses and checks
// each; the budget's default comes from LMDBLOADER_RSS_BUDGET.
// `source`: a path, or a list of paths read as one dataset (reader.h).
template <typename Source>
std::unique_ptr<Reader> OpenReader(const Source& source, const std::map<std::string, std::string>& given) {
  ReaderOptions o;
  ThrowIfError(ReaderOptionsFromEnvironment(&o));
  for (const auto& [name, text] : given) ThrowIfError(SetReaderOption(name, text, &o));
  std::unique_ptr<Reader> r;
  Status s;
  {
    py::gil_scoped_release release;
    s = Reader::Open(source, o, &r);
  }
  ThrowIfError(s);
  return r;
}

}  // namespace

void RegisterReader(py::module_& m) {
  m.def("parse_byte_size", [](const std::string& text) {
    uint64_t v = 0;
    ThrowIfError(ParseByteSize(text, &v));
    return v;
  });
  m.def("reader_options", [] { return OptionRows(ReaderOptionList(), &ReaderOptionValue); });

  // A view's bytes, exposed through the buffer protocol (read-only). The
  // RecordView inside keeps the mapping alive.
  py::class_<RecordView>(m, "RecordView", py::buffer_protocol())
      .def_buffer([](RecordView& v) {
        return py::buffer_info(const_cast<char*>(v.data()), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(v.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", &RecordView::size);

  py::class_<Reader>(m, "Reader")
      .def(py::init(&OpenReader<std::string>), py::arg("path"), py::arg("options"))
      .def(py::init(&OpenReader<std::vector<std::string>>), py::arg("paths"), py::arg("options"))
      .def("option", [](const Reader& r, const std::string& name) { return ReaderOptionValue(r.options(), name); })
      .def("__len__", &Reader::size)
      .def_property_readonly("path", &Reader::path)
      .def_property_readonly("mode", [](const Reader& r) { return AccessModeName(r.mode()); })
      .def_property_readonly("manifest", &Reader::manifest)
      .def_property_readonly("db_flags", &Reader::db_flags)
      .def("read", &ReadBytes)
      .def("read_batch", &ReadBatchBytes)
      .def("decode", &DecodeOne)
      .def("decode_batch", &DecodeBatch, py::arg("indices"), py::arg("transform") = py::none())
      .def("apply_batch", &ApplyBatch, py::arg("indices"), py::arg("fn"))
      .def("apply_batch_views", &ApplyBatchViews, py::arg("indices"), py::arg("fn"))
      .def("value_sizes", [](Reader& r, const py::iterable& indices) { return ValueSizes(r, Positions(r, indices)); })
      .def("read_batch_into", &ReadBatchInto, py::arg("indices"), py::arg("buffers"), py::arg("offsets") = py::none())
      .def("value_size", [](Reader& r, const py::object& i) {
        uint64_t size = 0;
        ThrowIfError(r.ValueSize(Position(r, i), &size));
        return size;
      })
      .def("check_mappings", [](const Reader& r) { ThrowIfError(r.CheckMappings()); })
      .def("view", [](Reader& r, const py::object& i) {
        RecordView v;
        ThrowIfError(r.View(Position(r, i), &v));
        return v;
      })
      .def("key", [](Reader& r, const py::object& i) {
        std::string k;
        ThrowIfError(r.Key(Position(r, i), &k));
        return py::bytes(k);
      })
      .def("find", [](Reader& r, const py::bytes& key) -> py::object {
        uint64_t pos = 0;
        Status s = r.Find(std::string_view(key), &pos);
        if (s.IsNotFound()) return py::none();
        ThrowIfError(s);
        return py::int_(pos);
      })
      .def("file_set_members", [](const Reader& r) {
        py::list out;
        for (const FileSetMember& m : r.FileSetMembers())
          out.append(py::make_tuple(py::bytes(m.path), m.first, m.records));  // file system bytes: fsdecode'd
        return out;
      })
      .def("find_in_member", [](Reader& r, size_t member, const py::bytes& key) -> py::object {
        const std::string_view k(key);
        uint64_t pos = 0;
        Status s;
        {
          py::gil_scoped_release release;  // opening the member reads its index
          s = r.FindInMember(member, k, &pos);
        }
        if (s.IsNotFound()) return py::none();
        ThrowIfError(s);
        return py::int_(pos);
      })
      .def("lower_bound", [](Reader& r, const py::bytes& key) {
        uint64_t pos = 0;
        ThrowIfError(r.LowerBound(std::string_view(key), &pos));
        return pos;
      })
      .def("name", [](Reader& r, const py::object& i) {
        const uint64_t pos = Position(r, i);
        std::string n;
        ThrowIfError(r.Name(pos, &n));
        // Names that are keys are bytes (an LMDB's keys); others UTF-8 text, checked by the core.
        if (r.corpus_keys() == CorpusKeys::kNames) return py::object(py::bytes(n));
        return py::object(py::str(n));
      })
      .def_property_readonly("keyed_by_names", [](const Reader& r) { return r.corpus_keys() == CorpusKeys::kNames; })
      .def("column_chunks", [](Reader& r, const std::string& name) {
        std::vector<ColumnChunk> chunks;
        ThrowIfError(r.Column(name, &chunks));
        py::list out;
        for (const auto& c : chunks) out.append(py::make_tuple(c.data_path, c.offset, c.size, c.dtype));
        return out;
      })
      .def("read_column", [](Reader& r, const std::string& name) {
        std::string bytes;
        ThrowIfError(r.ReadColumn(name, &bytes));
        return py::bytes(bytes);
      })
      .def("record_positions", [](const Reader& r) {
        std::vector<uint64_t> positions;
        ThrowIfError(r.RecordPositions(&positions));
        return py::bytes(reinterpret_cast<const char*>(positions.data()), positions.size() * 8);
      })
      .def("remap", [](Reader& r) { ThrowIfError(r.Remap()); })
      .def("expect_share", [](Reader& r, double share, bool in_chunks) { ThrowIfError(r.ExpectShare(share, in_chunks)); },
           py::arg("share"), py::arg("in_chunks") = false)
      .def("stats", [](Reader& r) { return ReportDict(r.stats()); });
}

}  // namespace lmdbloader
