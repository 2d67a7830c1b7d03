// Reader: corpus metadata (manifest, checksums, names, columns), each value
// checked against the manifest's checksums before use, and the records'
// checksums checked as they are read.
#include "lmdbloader/reader.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/checksum.h"
#include "io/batch_io.h"
#include "lmdb/index_file.h"
#include "corpus/corpus_format.h"
#include "corpus/corpus_manifest.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Rep::LoadCorpusMeta(Part& part, bool* corpus) {
  *corpus = false;
  const auto& meta = part.index.meta();
  auto manifest = meta.find(std::string(kManifestKey));
  const std::string& where = part.location.data_path;
  if (!options_.db_name.empty()) return Status::OK();
  // Keys only a corpus writer puts there: their presence makes this a corpus,
  // whatever else is damaged.
  const bool corpus_like = meta.count(std::string(kManifestChecksumKey)) || meta.count(std::string(kChecksumsKey)) ||
                           (meta.count(std::string(kNamesBlobKey)) && meta.count(std::string(kNamesOffsetsKey)));
  if (manifest == meta.end()) {
    if (corpus_like) return Status::Corruption("corpus " + where + ": the manifest is missing");
    return Status::OK();
  }
  if (!part.index.sequential_keys()) {
    if (corpus_like)
      return Status::Corruption("corpus " + where + ": the record keys are not the record numbers 0.." +
                                std::to_string(part.index.size()) + " (damaged keys)");
    return Status::OK();
  }
  std::string bytes;
  LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, manifest->first, &bytes));
  auto damaged = [&](const std::string& what) { return Status::Corruption("corpus " + where + ": " + what); };
  auto stored_sum = meta.find(std::string(kManifestChecksumKey));
  if (stored_sum != meta.end()) {
    std::string sum;
    LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, stored_sum->first, &sum));
    uint64_t expected = 0;
    if (sum.size() != 8) return damaged("the manifest's checksum is not 8 bytes");
    std::memcpy(&expected, sum.data(), 8);
    if (Checksum(bytes) != expected) return damaged("the manifest is damaged (checksum mismatch)");
  }
  CorpusManifest m;
  Status parsed = ParseCorpusManifest(bytes, where, &m);
  if (parsed.IsNotFound()) {
    // With the rest of a corpus's metadata beside it, this is a corpus whose
    // manifest is damaged; alone, a plain LMDB that happens to hold the key.
    return corpus_like ? Status::Corruption(parsed.message()) : Status::OK();
  }
  LMDBLOADER_RETURN_IF_ERROR(parsed);
  *corpus = true;
  if (m.records != part.index.size())
    return damaged("the manifest says " + std::to_string(m.records) + " records, the database holds " +
                   std::to_string(part.index.size()));
  part.column_dtypes = m.column_dtypes;
  for (const auto& [name, dtype] : m.column_dtypes) {
    auto c = meta.find(std::string(kColumnPrefix) + name);
    if (c == meta.end()) return damaged("column '" + name + "' is listed but absent");
    if (c->second.size != part.index.size() * 8)
      return damaged("column '" + name + "' holds " + std::to_string(c->second.size) + " bytes for " +
                     std::to_string(part.index.size()) + " records");
  }
  if (m.has_checksums) {
    part.meta_sums = m.meta_sums;
    auto records = meta.find(std::string(kChecksumsKey));
    if (records == meta.end() || records->second.size != part.index.size() * 8)
      return damaged("the record checksums are missing or do not match the record count");
    if (part.index.paged()) {
      // Held whole, they would cost 8 bytes a record in every process: read
      // with each record instead (ReadChecksums). The column is not checked
      // whole here (800 MB at 10^8 records); a damaged sum fails its record's
      // check, never passes a wrong record.
      part.checksums.clear();
      part.checksum_column = records->second;
    } else {
      std::string blob;
      LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(part, records->first, &blob));
      part.checksums.resize(part.index.size());
      if (!blob.empty()) std::memcpy(part.checksums.data(), blob.data(), blob.size());
    }
    if (options_.verify_checksums == ChecksumPolicy::kFirstRead)
      LMDBLOADER_RETURN_IF_ERROR(VerifiedRecords::Create(part.index.size(), &part.verified));
  }
  if (m.keys == CorpusKeys::kNames) {
    // The names are this corpus's keys: held like a plain LMDB's keys, and
    // checked once here (their checksums) instead of at the first name().
    std::string names, offsets;
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(part, std::string(kNamesBlobKey), &names));
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(part, std::string(kNamesOffsetsKey), &offsets));
    part.name_keys = std::make_unique<NameKeys>();
    LMDBLOADER_RETURN_IF_ERROR(NameKeys::Build(std::move(names), offsets, part.index.size(), where, part.name_keys.get()));
    part.names_checked.store(true, std::memory_order_release);
  }
  part.manifest = std::move(bytes);
  return Status::OK();
}

Status Reader::Rep::ReadCheckedMeta(Part& part, const std::string& key, std::string* bytes) {
  LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, key, bytes));
  auto sum = part.meta_sums.find(key);
  if (sum != part.meta_sums.end() && Checksum(*bytes) != sum->second)
    return Status::Corruption("corpus " + part.location.data_path + ": " + key.substr(kMetaPrefix.size()) +
                              " is damaged (checksum mismatch)");
  return Status::OK();
}

Status Reader::Rep::CheckMeta(Part& part, const std::string& key) {
  auto it = part.index.meta().find(key);
  if (it == part.index.meta().end()) return Status::NotFound(key + " not in " + part.location.data_path);
  auto sum = part.meta_sums.find(key);
  if (sum == part.meta_sums.end()) return Status::OK();
  if (it->second.offset > part.index.identity.size || it->second.size > part.index.identity.size - it->second.offset)
    return Status::Corruption("read " + part.location.data_path + ": " + key + " lies past the end of the file");
  constexpr uint64_t kPiece = 1 << 20;
  std::string piece(std::min(kPiece, it->second.size), '\0');
  ChecksumStream checksum;
  for (uint64_t done = 0; done < it->second.size;) {
    const uint64_t n = std::min(kPiece, it->second.size - done);
    LMDBLOADER_RETURN_IF_ERROR(PreadAt(part, it->second.offset + done, n, piece.data()));
    checksum.Add(piece.data(), n);
    done += n;
  }
  if (checksum.Value() != sum->second)
    return Status::Corruption("corpus " + part.location.data_path + ": " + key.substr(kMetaPrefix.size()) +
                              " is damaged (checksum mismatch)");
  return Status::OK();
}

Status Reader::Rep::ReadMeta(Part& part, const std::string& key, std::string* bytes) {
  auto it = part.index.meta().find(key);
  if (it == part.index.meta().end()) return Status::NotFound(key + " not in " + part.location.data_path);
  if (it->second.offset > part.index.identity.size || it->second.size > part.index.identity.size - it->second.offset)
    return Status::Corruption("read " + part.location.data_path + ": " + key + " lies past the end of the file");
  bytes->resize(it->second.size);
  return PreadAt(part, it->second.offset, it->second.size, bytes->data());
}

Status Reader::Name(uint64_t index, std::string* name) {
  LMDBLOADER_RETURN_IF_ERROR(rep_->EnsureProcess());
  // No corpus is a set's member (EnsureOpen refuses them), and a set's
  // closed files have no Part to look in.
  if (rep_->file_set_) return Status::NotFound(rep_->path_ + " has no record names (a set of plain LMDB files)");
  Rep::Part* part = nullptr;
  uint64_t local = 0;
  LMDBLOADER_RETURN_IF_ERROR(rep_->Locate(index, &part, &local));
  const auto& meta = part->index.meta();
  auto offsets = meta.find(std::string(kNamesOffsetsKey));
  auto blob = meta.find(std::string(kNamesBlobKey));
  if (part->name_keys) {
    *name = std::string(part->name_keys->Name(local));
    return Status::OK();
  }
  if (offsets == meta.end() || blob == meta.end())
    return Status::NotFound(rep_->path_ + " has no record names (not an lmdbloader corpus)");
  if (!part->names_checked.load(std::memory_order_acquire)) {
    // Names are checked against the manifest's checksums the first time one
    // is read in this part, as `verify` checks them: a changed byte is an
    // error, never another name. Read a piece at a time: the names of a
    // large corpus are hundreds of MB this process must not hold.
    LMDBLOADER_RETURN_IF_ERROR(rep_->CheckMeta(*part, offsets->first));
    LMDBLOADER_RETURN_IF_ERROR(rep_->CheckMeta(*part, blob->first));
    part->names_checked.store(true, std::memory_order_release);
  }
  if (offsets->second.size < (local + 2) * 8)
    return Status::Corruption("read " + part->location.data_path + ": name offsets too short");
  uint64_t range[2];
  LMDBLOADER_RETURN_IF_ERROR(rep_->PreadAt(*part, offsets->second.offset + local * 8, 16,
                                           reinterpret_cast<char*>(range)));
  if (range[1] < range[0] || range[1] > blob->second.size)
    return Status::Corruption("read " + part->location.data_path + ": bad name offsets");
  name->resize(range[1] - range[0]);
  LMDBLOADER_RETURN_IF_ERROR(rep_->PreadAt(*part, blob->second.offset + range[0], range[1] - range[0], name->data()));
  // Names are UTF-8 text in a corpus (the writer refuses others): bytes that
  // are not, under a matching checksum, came from another writer.
  if (!IsUtf8(*name))
    return Status::Corruption("corpus " + part->location.data_path + ": the name of record " + std::to_string(index) +
                              " is not UTF-8 text");
  return Status::OK();
}

Status Reader::Column(const std::string& name, std::vector<ColumnChunk>* chunks) const {
  chunks->clear();
  const std::string key = std::string(kColumnPrefix) + name;
  if (rep_->file_set_) return Status::NotFound("no column '" + name + "' in " + rep_->FirstDataPath());
  for (const auto& part : rep_->parts_) {
    auto it = part->index.meta().find(key);
    if (it == part->index.meta().end())
      return Status::NotFound("no column '" + name + "' in " + part->location.data_path);
    auto dtype = part->column_dtypes.find(name);
    chunks->push_back(ColumnChunk{part->location.data_path, it->second.offset, it->second.size,
                                  dtype == part->column_dtypes.end() ? "<i8" : dtype->second});
  }
  return Status::OK();
}

Status Reader::ReadColumn(const std::string& name, std::string* bytes) {
  LMDBLOADER_RETURN_IF_ERROR(rep_->EnsureProcess());
  std::vector<ColumnChunk> chunks;
  LMDBLOADER_RETURN_IF_ERROR(Column(name, &chunks));
  uint64_t total = 0;
  for (const auto& c : chunks) total += c.size;
  bytes->resize(total);
  uint64_t at = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::string chunk;
    LMDBLOADER_RETURN_IF_ERROR(rep_->ReadCheckedMeta(*rep_->parts_[i], std::string(kColumnPrefix) + name, &chunk));
    std::memcpy(bytes->data() + at, chunk.data(), chunk.size());
    at += chunks[i].size;
  }
  return Status::OK();
}

Status Reader::SaveIndexBeside() {
  if (rep_->file_set_) return Status::InvalidArgument(rep_->path_ + " is a set of files: save each file's index on its own");
  for (const auto& part : rep_->parts_)
    LMDBLOADER_RETURN_IF_ERROR(SaveIndex(IndexFileBeside(part->location, rep_->options_.db_name), part->index));
  return Status::OK();
}

Status Reader::CheckMetadata() {
  LMDBLOADER_RETURN_IF_ERROR(rep_->EnsureProcess());
  if (rep_->file_set_) return Status::OK();  // plain LMDB files: no manifest lists metadata
  for (const auto& part : rep_->parts_) {
    for (const auto& [key, sum] : part->meta_sums) {
      if (part->index.meta().find(key) == part->index.meta().end())
        return Status::Corruption("corpus " + part->location.data_path + ": " + key.substr(kMetaPrefix.size()) +
                                  " is listed in the manifest but absent");
      LMDBLOADER_RETURN_IF_ERROR(rep_->CheckMeta(*part, key));
    }
  }
  return Status::OK();
}

Status Reader::Rep::VerifyRecord(const Part& part, uint64_t local, const char* data, uint64_t size,
                                 const uint64_t* expected) const {
  if (!part.has_checksums() || options_.verify_checksums == ChecksumPolicy::kOff) return Status::OK();
  if (part.verified && part.verified->Has(local)) return Status::OK();
  uint64_t sum = 0;
  if (!part.checksums.empty()) {
    sum = part.checksums[local];
  } else if (expected != nullptr) {
    sum = *expected;
  } else {
    const Part* one = &part;
    LMDBLOADER_RETURN_IF_ERROR(ReadChecksums(&one, &local, 1, &sum));
  }
  if (Checksum(data, size) == sum) {
    if (part.verified) part.verified->Add(local);
    return Status::OK();
  }
  // With a saved index, the record's location came from that file: say so,
  // since a wrong index reads as a damaged record (`lmdbloader verify` walks
  // the data itself and tells which).
  return Status::Corruption("record " + std::to_string(local) + " of " + part.location.data_path +
                            " is damaged: its checksum does not match (" + std::to_string(size) + " bytes)" +
                            (part.index_file.empty() ? std::string()
                                                     : "; its location was " + part.index_file +
                                                           ", which is wrong if the data file verifies"));
}

Status Reader::Rep::ReadChecksums(const Part* const* parts, const uint64_t* locals, size_t count,
                                  uint64_t* sums) const {
  // A corpus whose index is paged keeps its records' checksums where the
  // file has them (8 bytes a record, one value of the corpus's metadata):
  // read with the records, never held.
  std::vector<ReadRequest> requests;
  std::vector<size_t> at;
  for (size_t k = 0; k < count; ++k) {
    const Part& p = *parts[k];
    if (p.checksum_column.size == 0) continue;
    ReadRequest r;
    r.fd = p.fd;
    r.offset = p.checksum_column.offset + locals[k] * 8;
    r.size = 8;
    r.dst = reinterpret_cast<char*>(&sums[k]);
    r.path = &p.location.data_path;
    requests.push_back(r);
  }
  if (requests.empty()) return Status::OK();
  if (requests.size() == 1 || !io_) return PreadFully(requests[0]);
  return io_->ReadAll(requests.data(), requests.size());
}

}  // namespace lmdbloader
