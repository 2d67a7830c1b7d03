// CorpusKeys: what a corpus's records are looked up by.
//
// Every corpus stores record i under the 8-byte big-endian key i (so a
// position is a record number) and keeps one name per record. The manifest's
// "keys" says what a reader's Find, Get, Key and LowerBound work on:
//   kRecordNumbers  the record numbers; names are UTF-8 text (files, JSONL
//                   lines). What `convert` writes from folders and manifests.
//                   Manifest: no "keys", or "keys": "numbers".
//   kNames          the names, which are bytes of any kind: the keys of the
//                   LMDB a corpus was converted from (`convert --from lmdb`),
//                   so `Get(original_key)` returns the original value.
//                   Manifest: "keys": "names".
#ifndef LMDBLOADER_CORPUS_KEYS_H_
#define LMDBLOADER_CORPUS_KEYS_H_

namespace lmdbloader {

enum class CorpusKeys { kRecordNumbers, kNames };

}  // namespace lmdbloader

#endif  // LMDBLOADER_CORPUS_KEYS_H_
