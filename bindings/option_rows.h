// An option table of the library (ReaderOptionList, ConvertOptionList) as
// Python sees it: one (name, kind, values, help, default) tuple an option,
// from which lmdbloader/_options.py turns keywords into text.
#ifndef LMDBLOADER_BINDINGS_OPTION_ROWS_H_
#define LMDBLOADER_BINDINGS_OPTION_ROWS_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/options.h"

namespace lmdbloader {

// `value_of(defaults, name)` reads an option of a default-constructed struct.
template <typename Options>
pybind11::list OptionRows(const std::vector<OptionInfo>& list,
                          std::string (*value_of)(const Options&, std::string_view)) {
  pybind11::list out;
  const Options defaults;
  for (const OptionInfo& o : list)
    out.append(pybind11::make_tuple(o.name, o.kind, o.values, o.help, value_of(defaults, o.name)));
  return out;
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_OPTION_ROWS_H_
