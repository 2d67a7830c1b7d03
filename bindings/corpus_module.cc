// Writing corpora from Python (lmdbloader/convert.h, lmdbloader/writer.h):
// convert, write_shard_list and _core.CorpusWriter.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "lmdbloader/convert.h"
#include "lmdbloader/shard_set.h"
#include "lmdbloader/writer.h"
#include "report_dicts.h"
#include "option_rows.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

void RegisterCorpus(py::module_& m) {
  // The converter's options by name as text (ConvertOptionList), as the
  // reader's: the library parses and checks each one.
  m.def("convert_options", [] { return OptionRows(ConvertOptionList(), &ConvertOptionValue); });
  m.def("convert", [](const std::map<std::string, std::string>& given) {
    ConvertOptions o;
    for (const auto& [name, text] : given) ThrowIfError(SetConvertOption(name, text, &o));
    ConvertSummary summary;
    Status s;
    {
      py::gil_scoped_release release;
      s = Convert(o, &summary);
    }
    ThrowIfError(s);
    return ReportDict(summary);
  });

  m.def("write_shard_list", [](const std::string& folder) {
    uint64_t records = 0;
    ThrowIfError(WriteShardList(folder, &records));
    return records;
  });

  py::class_<CorpusWriter>(m, "CorpusWriter")
      .def(py::init([](const std::string& target, bool overwrite, bool keyed_by_names) {
             WriterOptions o;
             o.overwrite = overwrite;
             o.keys = keyed_by_names ? CorpusKeys::kNames : CorpusKeys::kRecordNumbers;
             std::unique_ptr<CorpusWriter> w;
             ThrowIfError(CorpusWriter::Create(target, o, &w));
             return w;
           }),
           py::arg("target"), py::arg("overwrite") = false, py::arg("keyed_by_names") = false)
      .def("add", [](CorpusWriter& w, const std::string& name, const py::bytes& record,
                     const std::map<std::string, double>& columns) {
        ThrowIfError(w.Add(name, std::string_view(record), columns));
      }, py::arg("name"), py::arg("record"), py::arg("columns") = std::map<std::string, double>{})
      .def("finish", [](CorpusWriter& w, const std::string& manifest_json) {
        Status s;
        {
          py::gil_scoped_release release;
          s = w.Finish(manifest_json);
        }
        ThrowIfError(s);
      })
      .def("__len__", &CorpusWriter::size);
}

}  // namespace lmdbloader
