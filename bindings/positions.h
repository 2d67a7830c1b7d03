// Python indices to record positions, checked against a Reader: what every
// reading method of _core.Reader takes first.
#ifndef LMDBLOADER_BINDINGS_POSITIONS_H_
#define LMDBLOADER_BINDINGS_POSITIONS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "lmdbloader/reader.h"

namespace lmdbloader {

// Any Python integer (numpy's too) to a position; negative counts from the
// end. IndexError naming the file for anything out of range, however large;
// TypeError for what is not an integer.
uint64_t Position(const Reader& r, const pybind11::handle& index);
// Position of each index, in order.
std::vector<uint64_t> Positions(const Reader& r, const pybind11::iterable& indices);
// The size in bytes of the record at each position.
std::vector<uint64_t> ValueSizes(const Reader& r, const std::vector<uint64_t>& pos);

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_POSITIONS_H_
