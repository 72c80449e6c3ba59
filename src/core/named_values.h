// Enums named at the edges (flags, server fields, env variables): a table of
// (value, name) rows per enum, and one way to read and write a name, so
// every parser's error lists the valid names the same way.
#pragma once

#include <cstddef>
#include <string>

#include "core/error.h"

namespace splitdec {

template <class E>
struct NamedValue {
  E value;
  const char* name;
};

// The value named `name`; InputError "unknown <what> '<name>' (valid: a, b, ...)<hint>" otherwise.
template <class E, std::size_t N>
E parse_named(const NamedValue<E> (&table)[N], const std::string& name, const char* what, const std::string& hint = "") {
  std::string valid;
  for (const NamedValue<E>& row : table) {
    if (name == row.name) return row.value;
    valid += (valid.empty() ? "" : ", ") + std::string(row.name);
  }
  throw InputError("unknown " + std::string(what) + " '" + name + "' (valid: " + valid + ")" + hint);
}

// The name of `value`, "?" for a value the table lacks.
template <class E, std::size_t N>
const char* name_of(const NamedValue<E> (&table)[N], E value) {
  for (const NamedValue<E>& row : table)
    if (row.value == value) return row.name;
  return "?";
}

}  // namespace splitdec
