// The field lists of the reported structs (lmdbloader/report_fields.h), so
// that tests check every Python dict and the command's JSON against them.
#include <pybind11/pybind11.h>

#include "report_dicts.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

void RegisterReports(py::module_& m) {
  m.def("report_fields", [] {
    py::dict out;
    out["ReaderStats"] = ReportFieldList<ReaderStats>();
    out["DatabaseInfo"] = ReportFieldList<DatabaseInfo>();
    out["ConvertSummary"] = ReportFieldList<ConvertSummary>();
    out["ProcessMemory"] = ReportFieldList<ProcessMemory>();
    return out;
  });
}

}  // namespace lmdbloader
