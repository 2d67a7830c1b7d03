// EnumNames: an enum's values and the names every front spells them with,
// written once in a table (array_record keeps its option enums this way).
// Parsing, naming, validating a value and the "a, b or c" lists that help and
// errors show all read the same table, so a name is never spelled twice.
#ifndef LMDBLOADER_SRC_BASE_ENUM_NAMES_H_
#define LMDBLOADER_SRC_BASE_ENUM_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value`; nullptr when the table has none (a value cast from a
// bad integer).
template <typename E, size_t N>
const char* NameOf(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return nullptr;
}

// "a, b, c" (joiner ", ") or "a, b or c" (last " or ").
template <typename E, size_t N>
std::string NameList(const EnumName<E> (&table)[N], const char* last = ", ") {
  std::string out;
  for (size_t i = 0; i < N; ++i) out += (i == 0 ? "" : i + 1 == N ? last : ", ") + std::string(table[i].name);
  return out;
}

// Sets *value from `text`. InvalidArgument "<what> must be one of a, b, c;
// got 'x'" otherwise.
template <typename E, size_t N>
Status ParseName(const EnumName<E> (&table)[N], std::string_view what, std::string_view text, E* value) {
  for (const EnumName<E>& e : table)
    if (text == e.name) {
      *value = e.value;
      return Status::OK();
    }
  return Status::InvalidArgument(std::string(what) + " must be one of " + NameList(table) + "; got '" +
                                 std::string(text) + "'");
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_BASE_ENUM_NAMES_H_
