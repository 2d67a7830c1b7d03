// Writing corpora from Python (lmdbloader/convert.h, lmdbloader/writer.h):
// convert, write_shard_list and _core.CorpusWriter.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "lmdbloader/convert.h"
#include "lmdbloader/writer.h"
#include "report_dicts.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

void RegisterCorpus(py::module_& m) {
  m.attr("MAX_SHARDS") = kMaxShards;
  m.def("convert", [](const std::string& kind, const std::string& source, const std::string& output,
                      bool overwrite, const std::string& order, uint64_t seed, uint32_t frame_step,
                      uint32_t num_shards, int32_t shard_index, bool skip_bad, bool progress,
                      const std::string& db) {
    ConvertOptions o;
    o.source_kind = kind;
    o.source = source;
    o.output = output;
    o.overwrite = overwrite;
    o.order = order;
    o.seed = seed;
    o.frame_step = frame_step;
    o.num_shards = num_shards;
    o.shard_index = shard_index;
    o.skip_bad = skip_bad;
    o.progress = progress;
    o.db_name = db;
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
