// The fields of the structs lmdbloader reports (ReaderStats, DatabaseInfo,
// ConvertSummary, ProcessMemory), listed once: each field's name and member.
// Python's dicts (Reader.stats(), inspect, convert, process_memory) and the
// command's JSON (`lmdbloader scan|stat|convert --json`) are both written
// from these lists: a field listed here reaches every output with the same
// name (a field of the struct left out of its list reaches none).
//
// Every field goes into the Python dict under its name. The command's JSON,
// which reports a run rather than the struct, writes the fields marked
// InCommand(), under the same name unless InCommand names another. The
// exceptions, kept because scripts read those keys:
//   - ReaderStats::rss_budget is "rss_budget_bytes" in `scan --json`, beside
//     the scan's own *_bytes keys; `records` there is the records the scan
//     read, so ReaderStats::records (the database's) is not written.
//   - DatabaseInfo::data_path is "data_file" in `stat --json`, beside the
//     "path" it was opened with.
//
// Example:
//   ForEachField(stats, [&](const auto& field, const auto& value) {
//     std::cout << field.name << " = " << value << "\n";
//   });
//
// Thread-safety: the lists are constant; ForEachField reads only the struct
// it is given.
#ifndef LMDBLOADER_REPORT_FIELDS_H_
#define LMDBLOADER_REPORT_FIELDS_H_

#include <tuple>
#include <utility>

#include "lmdbloader/convert.h"
#include "lmdbloader/database_info.h"
#include "lmdbloader/memory.h"
#include "lmdbloader/reader.h"

namespace lmdbloader {

// Whether the command's JSON writes a field, and under which key.
struct InCommand {
  constexpr InCommand() = default;
  // The key in the command's JSON where it differs from the field's name.
  constexpr explicit InCommand(const char* key) : key(key) {}
  const char* key = nullptr;  // nullptr: the field's own name
};

// One reported field: its name (the Python dict's key) and where it lives.
template <typename Struct, typename T>
struct ReportField {
  const char* name;
  T Struct::*member;
  const char* command_key = nullptr;  // its key in the command's JSON; nullptr: not written there
};

template <typename Struct, typename T>
constexpr ReportField<Struct, T> Field(const char* name, T Struct::*member) {
  return {name, member};
}
template <typename Struct, typename T>
constexpr ReportField<Struct, T> Field(const char* name, T Struct::*member, InCommand command) {
  return {name, member, command.key ? command.key : name};
}

// ReportFieldsOf<S>::kFields: the fields of S, in the order reported.
template <typename Struct>
struct ReportFieldsOf;

template <>
struct ReportFieldsOf<ReaderStats> {
  static constexpr auto kFields = std::make_tuple(
      Field("rss_budget", &ReaderStats::rss_budget, InCommand("rss_budget_bytes")),
      Field("mode", &ReaderStats::mode, InCommand()),
      Field("lmdb_format", &ReaderStats::lmdb_format, InCommand()),
      Field("records", &ReaderStats::records),
      Field("process_rss", &ReaderStats::process_rss),
      Field("process_file_rss", &ReaderStats::process_file_rss),
      Field("mapped_rss", &ReaderStats::mapped_rss),
      Field("drops", &ReaderStats::drops, InCommand()),
      Field("remaps", &ReaderStats::remaps),
      Field("records_read", &ReaderStats::records_read),
      Field("bytes_read", &ReaderStats::bytes_read),
      Field("index_bytes", &ReaderStats::index_bytes, InCommand()),
      Field("index_source", &ReaderStats::index_source, InCommand()),
      Field("index_residence", &ReaderStats::index_residence, InCommand()),
      Field("index_cache_held", &ReaderStats::index_cache_held, InCommand()),
      Field("index_page_reads", &ReaderStats::index_page_reads),
      Field("index_entry_reads", &ReaderStats::index_entry_reads),
      Field("index_cache_hits", &ReaderStats::index_cache_hits),
      Field("leaf_page_reads", &ReaderStats::leaf_page_reads),
      Field("leaf_values_read", &ReaderStats::leaf_values_read),
      Field("leaf_node_reads", &ReaderStats::leaf_node_reads),
      Field("checksum_bytes", &ReaderStats::checksum_bytes, InCommand()),
      Field("files", &ReaderStats::files, InCommand()),
      Field("files_open", &ReaderStats::files_open, InCommand()),
      Field("files_skipped", &ReaderStats::files_skipped, InCommand()),
      Field("io_engine", &ReaderStats::io_engine, InCommand()),
      Field("io_fallback", &ReaderStats::io_fallback, InCommand()),
      Field("queue_depth", &ReaderStats::queue_depth, InCommand()),
      Field("cache_policy", &ReaderStats::cache_policy, InCommand()),
      Field("file_system", &ReaderStats::file_system, InCommand()),
      Field("read_around", &ReaderStats::read_around, InCommand()),
      Field("link_requests_us", &ReaderStats::link_requests_us),
      Field("link_bytes_per_s", &ReaderStats::link_bytes_per_s),
      Field("chunks_filled", &ReaderStats::chunks_filled, InCommand()));
};

template <>
struct ReportFieldsOf<DatabaseInfo> {
  static constexpr auto kFields = std::make_tuple(
      Field("data_path", &DatabaseInfo::data_path, InCommand("data_file")),
      Field("file_bytes", &DatabaseInfo::file_bytes, InCommand()),
      Field("page_size", &DatabaseInfo::page_size, InCommand()),
      Field("lmdb_format", &DatabaseInfo::lmdb_format, InCommand()),
      Field("depth", &DatabaseInfo::depth, InCommand()),
      Field("branch_pages", &DatabaseInfo::branch_pages, InCommand()),
      Field("leaf_pages", &DatabaseInfo::leaf_pages, InCommand()),
      Field("overflow_pages", &DatabaseInfo::overflow_pages, InCommand()),
      Field("entries", &DatabaseInfo::entries),
      Field("last_txnid", &DatabaseInfo::last_txnid, InCommand()),
      Field("last_pgno", &DatabaseInfo::last_pgno),
      Field("map_size", &DatabaseInfo::map_size));
};

template <>
struct ReportFieldsOf<ConvertSummary> {
  static constexpr auto kFields = std::make_tuple(
      Field("outputs", &ConvertSummary::outputs, InCommand()),
      Field("records", &ConvertSummary::records, InCommand()),
      Field("bytes", &ConvertSummary::bytes, InCommand()),
      Field("seconds", &ConvertSummary::seconds, InCommand()),
      Field("skipped", &ConvertSummary::skipped, InCommand()));
};

template <>
struct ReportFieldsOf<ProcessMemory> {
  static constexpr auto kFields = std::make_tuple(
      Field("rss", &ProcessMemory::rss),
      Field("pss", &ProcessMemory::pss),
      Field("uss", &ProcessMemory::uss),
      Field("shared", &ProcessMemory::shared),
      Field("file_rss", &ProcessMemory::file_rss),
      Field("shmem_rss", &ProcessMemory::shmem_rss));
};

// Calls fn(field, value) for each reported field of `s`, in list order;
// `field` is a ReportField (name, member, command_key), `value` a const
// reference to the member.
template <typename Struct, typename Fn>
void ForEachField(const Struct& s, Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field, s.*(field.member)), ...); }, ReportFieldsOf<Struct>::kFields);
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_REPORT_FIELDS_H_
