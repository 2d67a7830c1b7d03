// LMDB files inspected and copied (lmdbloader/database_info.h,
// named_databases.h, leaf_layout.h, lmdb_version.h, lmdb_copy.h): what lmdbloader.compat needs beyond a Reader.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "lmdbloader/database_info.h"
#include "lmdbloader/leaf_layout.h"
#include "lmdbloader/lmdb_copy.h"
#include "lmdbloader/lmdb_version.h"
#include "lmdbloader/named_databases.h"
#include "report_dicts.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

void RegisterInspect(py::module_& m) {
  m.def("inspect", [](const std::string& path, const std::string& db) {
    DatabaseInfo info;
    ThrowIfError(InspectDatabase(path, db, &info));
    return ReportDict(info);
  });
  m.def("named_databases", [](const std::string& path) {
    std::vector<std::string> names;
    ThrowIfError(ListNamedDatabases(path, &names));
    py::list out;
    for (const auto& n : names) out.append(py::bytes(n));
    return out;
  });
  m.def("copy_environment", [](const std::string& path, const std::string& dir, bool compact) {
    py::gil_scoped_release release;
    ThrowIfError(CopyEnvironmentToDir(path, dir, compact));
  });
  m.def("copy_environment_fd", [](const std::string& path, int fd, bool compact) {
    py::gil_scoped_release release;
    ThrowIfError(CopyEnvironmentToFd(path, fd, compact));
  });
  m.def("leaf_layout", [](const std::string& path, const std::string& db) {
    LeafLayout layout;
    ThrowIfError(ReadLeafLayout(path, db, &layout));
    py::dict dups;
    for (const auto& [key, starts] : layout.dup_page_starts) dups[py::int_(key)] = py::cast(starts);
    return py::make_tuple(py::cast(layout.key_page_starts), dups);
  });
  m.def("lmdb_version", [] {
    int major = 0, minor = 0, patch = 0;
    LmdbVersion(&major, &minor, &patch);
    return py::make_tuple(major, minor, patch);
  });
}

}  // namespace lmdbloader
