// The converter's options, each written once: its name, what it accepts, its
// check and its help (convert.h). The command's flags and Python's keywords
// are made from this table and pass their values through as text.
#include <cstdint>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "base/option_table.h"
#include "lmdbloader/convert.h"
#include "lmdbloader/shard_set.h"

namespace lmdbloader {
namespace {

constexpr EnumName<SourceKind> kSourceKinds[] = {{SourceKind::kImageFolder, "image_folder"},
                                                 {SourceKind::kVideoFolder, "video_folder"},
                                                 {SourceKind::kJsonl, "jsonl"},
                                                 {SourceKind::kLmdb, "lmdb"}};
constexpr EnumName<RecordOrder> kRecordOrders[] = {
    {RecordOrder::kGiven, "given"}, {RecordOrder::kSorted, "sorted"}, {RecordOrder::kShuffle, "shuffle"}};
constexpr EnumName<RecordLayout> kRecordLayouts[] = {{RecordLayout::kAsIs, "as_is"},
                                                     {RecordLayout::kCaffe, "caffe"},
                                                     {RecordLayout::kMsgpack, "msgpack"},
                                                     {RecordLayout::kRaw, "raw"}};

Status SetText(std::string_view text, std::string* field) {
  *field = std::string(text);
  return Status::OK();
}

std::string BoolText(bool b) { return b ? "true" : "false"; }

using ConvertEntry = OptionEntry<ConvertOptions>;

const std::vector<ConvertEntry>& Entries() {
  static const std::vector<ConvertEntry> entries = {
      {{"kind", "choice", NameList(kSourceKinds, " or "), "what the source is"},
       [](std::string_view t, ConvertOptions* o) { return ParseName(kSourceKinds, "kind", t, &o->source_kind); },
       [](const ConvertOptions& o) { return std::string(SourceKindName(o.source_kind)); }},
      {{"source", "text", "a folder, manifest or LMDB path", "what to convert"},
       [](std::string_view t, ConvertOptions* o) { return SetText(t, &o->source); },
       [](const ConvertOptions& o) { return o.source; }},
      {{"output", "text", "a path", "corpus to write (a folder of shards with num_shards > 1)"},
       [](std::string_view t, ConvertOptions* o) { return SetText(t, &o->output); },
       [](const ConvertOptions& o) { return o.output; }},
      {{"overwrite", "bool", "true or false", "replace an existing output"},
       [](std::string_view t, ConvertOptions* o) { return ParseBool("overwrite", t, &o->overwrite); },
       [](const ConvertOptions& o) { return BoolText(o.overwrite); }},
      {{"order", "choice", NameList(kRecordOrders, " or "),
        "the records' order: the listing's, by name, or shuffled with seed"},
       [](std::string_view t, ConvertOptions* o) { return ParseName(kRecordOrders, "order", t, &o->order); },
       [](const ConvertOptions& o) { return std::string(RecordOrderName(o.order)); }},
      {{"seed", "int", "0 to 2**64-1", "seed for order shuffle"},
       [](std::string_view t, ConvertOptions* o) { return SetInt("seed", t, 0, UINT64_MAX, &o->seed); },
       [](const ConvertOptions& o) { return std::to_string(o.seed); }},
      {{"frame_step", "int", "1 to 2147483647", "video_folder: keep every k-th frame"},
       [](std::string_view t, ConvertOptions* o) { return SetInt("frame_step", t, 1, INT32_MAX, &o->frame_step); },
       [](const ConvertOptions& o) { return std::to_string(o.frame_step); }},
      {{"num_shards", "int", "1 to " + std::to_string(kMaxShards), "split the records into this many shards"},
       [](std::string_view t, ConvertOptions* o) { return SetInt("num_shards", t, 1, kMaxShards, &o->num_shards); },
       [](const ConvertOptions& o) { return std::to_string(o.num_shards); }},
      {{"shard_index", "int", "0 to " + std::to_string(kMaxShards - 1) + "; -1: every shard",
        "write only this shard (one job of an array); then run `lmdbloader shard-list`"},
       [](std::string_view t, ConvertOptions* o) {
         return SetInt("shard_index", t, -1, kMaxShards - 1, &o->shard_index);
       },
       [](const ConvertOptions& o) { return std::to_string(o.shard_index); }},
      {{"skip_bad", "bool", "true or false", "skip bad inputs and list them in the summary"},
       [](std::string_view t, ConvertOptions* o) { return ParseBool("skip_bad", t, &o->skip_bad); },
       [](const ConvertOptions& o) { return BoolText(o.skip_bad); }},
      {{"progress", "bool", "true or false", "a progress line on stderr (the command: unless --no-progress, "
        "when stderr is a terminal)"},
       [](std::string_view t, ConvertOptions* o) { return ParseBool("progress", t, &o->progress); },
       [](const ConvertOptions& o) { return BoolText(o.progress); }},
      {{"db", "text", "a database name", "lmdb source: named database (empty: the main one)"},
       [](std::string_view t, ConvertOptions* o) { return SetText(t, &o->db_name); },
       [](const ConvertOptions& o) { return o.db_name; }},
      {{"record", "choice", NameList(kRecordLayouts, " or "),
        "lmdb source: split each value into fields (a Caffe Datum, msgpack frames or map, an encoded image), "
        "leaving out __name__ metadata keys; as_is keeps values as they are"},
       [](std::string_view t, ConvertOptions* o) { return ParseName(kRecordLayouts, "record", t, &o->record); },
       [](const ConvertOptions& o) { return std::string(RecordLayoutName(o.record)); }},
  };
  return entries;
}

}  // namespace

const char* SourceKindName(SourceKind kind) {
  const char* name = NameOf(kSourceKinds, kind);
  return name ? name : "unknown";
}

const char* RecordOrderName(RecordOrder order) {
  const char* name = NameOf(kRecordOrders, order);
  return name ? name : "unknown";
}

const char* RecordLayoutName(RecordLayout layout) {
  const char* name = NameOf(kRecordLayouts, layout);
  return name ? name : "unknown";
}

const std::vector<OptionInfo>& ConvertOptionList() {
  static const std::vector<OptionInfo> list = OptionInfos(Entries());
  return list;
}

Status SetConvertOption(std::string_view name, std::string_view value, ConvertOptions* options) {
  return SetOptionByName(Entries(), name, value, options);
}

std::string ConvertOptionValue(const ConvertOptions& options, std::string_view name) {
  return OptionValueByName(Entries(), options, name);
}

}  // namespace lmdbloader
