// Convert: turns a dataset on disk into an lmdbloader corpus (the code behind
// `lmdbloader convert` and `lmdbloader.convert()`).
//
// Sources:
//   image_folder  root/<class>/<file>          -> {image: bytes, label, name}
//   video_folder  root/<class>/<video>/<frame> -> {frames: [bytes...], label, name}
//   jsonl         one JSON object a line: name, path or paths (relative to the
//                 manifest's folder, never outside it), label, other scalars
//                 (numbers become columns)      -> {image | frames, label, name, ...}
//   lmdb          any LMDB: values stored as they are, keys kept exactly (any
//                 bytes) as the names of a corpus keyed by names
//                 (corpus_keys.h), so Get(original key) finds each value;
//                 a corpus converts to an equal corpus (names, keys,
//                 columns, schema and label names carry over). A DUPSORT
//                 database is refused (one record a name).
// Files are stored as they are: no decoding, no re-encoding.
//
// Record layouts (`record`, lmdb sources only): how the values of an LMDB that
// another tool wrote hold their image and label. With a layout other than
// as_is, each value is split into a corpus's fields, so that the label becomes
// a column (Reader::ReadColumn, Python's ds.column("label")):
//   caffe    a Caffe Datum (caffe_datum.h): an encoded image -> {image, label};
//            raw pixels -> {pixels, channels, height, width, label}, the pixels
//            as Caffe stored them (channels x height x width bytes, BGR);
//            a Datum of float_data only (features, not an image) is refused
//   msgpack  a msgpack list of byte strings (CoCLR's video frames; bin, or str
//            as msgpack-python before 1.0 wrote bytes) -> {frames: [...]}; a
//            msgpack map is kept as it is, its integer "label" a column
//   raw      the value is the encoded image -> {image}
// `label` is there when the record has one. Keys of the form __name__
// (CoCLR's __keys__, __len__, __order__, __vlen__; folder2lmdb's __keys__) are
// the writer's metadata, not samples: they are left out and listed in the
// summary's `skipped`. A value that does not fit the layout is an
// InvalidArgument naming the source, the record and its key (with skip_bad,
// listed in `skipped`).
#ifndef LMDBLOADER_CONVERT_H_
#define LMDBLOADER_CONVERT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/image_record.h"  // RecordLayout: how an lmdb source's values are laid out
#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// What a corpus is written from (the list at the top of this file).
enum class SourceKind { kImageFolder, kVideoFolder, kJsonl, kLmdb };

// The order of the records: the listing's (file order, manifest lines, the
// LMDB's keys), by name, or shuffled with a seed.
enum class RecordOrder { kGiven, kSorted, kShuffle };

// Fields are set in C++ directly, or by name from text with
// SetConvertOption; ConvertOptionList() describes each one (its name, what
// it accepts, its help), and is what the command's flags and Python's
// keywords are made from.
struct ConvertOptions {
  SourceKind source_kind = SourceKind::kImageFolder;  // "kind"; the command's --from
  std::string source;       // folder, manifest file, or LMDB path
  std::string output;       // the corpus, or with num_shards > 1 the shard folder
  bool overwrite = false;
  RecordOrder order = RecordOrder::kSorted;
  uint64_t seed = 0;        // for kShuffle
  uint32_t frame_step = 1;  // video_folder: keep every k-th frame
  // Write shard `shard_index` of `num_shards` (records split in contiguous
  // ranges after ordering) to <output>/part-IIIII-of-NNNNN. shard_index -1
  // with num_shards > 1 writes them all, and the shard list.
  uint32_t num_shards = 1;
  int32_t shard_index = -1;
  bool skip_bad = false;   // skip bad inputs and list them instead of failing
  bool progress = false;   // progress line on stderr
  std::string db_name;     // lmdb source: named database ("db")
  // lmdb source: split each value into fields ("record"). kAsIs keeps values
  // as they are.
  RecordLayout record = RecordLayout::kAsIs;
};

// The options by name, as ReaderOptionList (options.h) describes the
// reader's: name (Python's keyword; the command's flag is --name, '_'
// written '-', except `kind`, which the command calls --from, and `source`
// and `output`, which it takes as positional arguments), kind of value, what
// it accepts and help.
const std::vector<OptionInfo>& ConvertOptionList();
// Sets option `name` from its text form. InvalidArgument naming the option
// and what it accepts (integers out of range included); for an unknown name,
// naming every known one.
Status SetConvertOption(std::string_view name, std::string_view value, ConvertOptions* options);
// Option `name`'s value as SetConvertOption reads it ("" for an unknown name).
std::string ConvertOptionValue(const ConvertOptions& options, std::string_view name);
// The names the enums are written with ("image_folder", "shuffle", ...).
const char* SourceKindName(SourceKind kind);
const char* RecordOrderName(RecordOrder order);
const char* RecordLayoutName(RecordLayout layout);

struct ConvertSummary {
  std::vector<std::string> outputs;  // corpora written
  uint64_t records = 0;
  uint64_t bytes = 0;  // record bytes written
  double seconds = 0;
  std::vector<std::string> skipped;  // "<file or line>: <why>"
};

// Writes the corpus (with num_shards > 1, the shards of shard_index, or all
// of them and their shard list: shard_set.h).
Status Convert(const ConvertOptions& options, ConvertSummary* summary);

}  // namespace lmdbloader

#endif  // LMDBLOADER_CONVERT_H_
