// What the kernel counts for a process (lmdbloader/memory.h), for
// lmdbloader.memory.
#include <pybind11/pybind11.h>

#include "lmdbloader/memory.h"
#include "report_dicts.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

void RegisterMemory(py::module_& m) {
  m.def("process_memory", [](int pid) {
    ProcessMemory mem;
    ThrowIfError(ReadProcessMemory(pid, &mem));
    return ReportDict(mem);
  }, py::arg("pid") = 0);
}

}  // namespace lmdbloader
