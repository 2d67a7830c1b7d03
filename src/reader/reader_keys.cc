// Reader: keys, lookups by key and where records lie (reader.cc reads).
#include <algorithm>

#include "lmdb/paged_index.h"
#include "lmdb/record_key.h"
#include "lmdbloader/reader.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Key(uint64_t index, std::string* key) const {
  if (index >= rep_->size_) return Status::OutOfRange(OutOfRangeMessage(rep_->path_, index, rep_->size_));
  if (rep_->file_set_) {
    Rep::Part* part = nullptr;
    size_t slot = 0;
    uint64_t local = 0;
    LMDBLOADER_RETURN_IF_ERROR(rep_->LocateSlot(index, &slot, &local));
    Rep::PartPins pins;
    LMDBLOADER_RETURN_IF_ERROR(rep_->PinSlots(&slot, 1, &part, &pins));
    return part->index.Key(local, key);
  }
  if (rep_->parts_.front()->name_keys) {
    const std::vector<uint64_t>& ends = rep_->part_ends_;
    const size_t p = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), index) - ends.begin());
    *key = std::string(rep_->parts_[p]->name_keys->Name(index - (p == 0 ? 0 : ends[p - 1])));
    return Status::OK();
  }
  if (rep_->parts_.size() == 1) return rep_->parts_[0]->index.Key(index, key);
  // Shard sets are corpora: keys are global record numbers.
  *key = RecordKey(index);
  return Status::OK();
}

CorpusKeys Reader::corpus_keys() const {
  if (rep_->file_set_) return CorpusKeys::kRecordNumbers;  // no corpus is a set's member
  return rep_->parts_.front()->name_keys ? CorpusKeys::kNames : CorpusKeys::kRecordNumbers;
}

Status Reader::RecordPositions(std::vector<uint64_t>* positions) const {
  positions->clear();
  positions->reserve(rep_->size_);
  uint64_t base = 0;
  for (size_t slot = 0; slot < rep_->parts_.size(); ++slot) {
    // A file set's files one at a time, each pinned while it is read.
    Rep::PartPins pins;
    Rep::Part* p = nullptr;
    LMDBLOADER_RETURN_IF_ERROR(rep_->PinSlots(&slot, 1, &p, &pins));
    if (p->index.paged()) {
      LMDBLOADER_RETURN_IF_ERROR(p->index.paged_index()->ForEach(
          [&](uint64_t, const ValueLocation& at) { positions->push_back(base + at.offset); }));
    } else {
      for (uint64_t i = 0; i < p->index.size(); ++i) positions->push_back(base + p->index.offset(i));
    }
    base += p->index.identity.size;
  }
  return Status::OK();
}

Status Reader::Find(std::string_view key, uint64_t* index) const {
  bool found = false;
  if (rep_->file_set_) {
    // Keys are the files' own: the first file, in order, that holds it.
    for (size_t p = 0; p < rep_->parts_.size() && !found; ++p) {
      Rep::PartPins pins;
      Rep::Part* part = nullptr;
      LMDBLOADER_RETURN_IF_ERROR(rep_->PinSlots(&p, 1, &part, &pins));
      LMDBLOADER_RETURN_IF_ERROR(part->index.Find(key, &found, index));
      if (found && p > 0) *index += rep_->part_ends_[p - 1];
    }
  } else if (rep_->parts_.front()->name_keys) {
    // Names are unique within a part, and a shard set's parts hold distinct records.
    for (size_t p = 0; p < rep_->parts_.size() && !found; ++p) {
      found = rep_->parts_[p]->name_keys->Find(key, index);
      if (found && p > 0) *index += rep_->part_ends_[p - 1];
    }
  } else {
    if (rep_->parts_.size() == 1) LMDBLOADER_RETURN_IF_ERROR(rep_->parts_[0]->index.Find(key, &found, index));
    else found = ParseRecordKey(key, index) && *index < rep_->size_;
  }
  // An expected outcome for most callers (compat's misses): no key in the
  // message, whose hex form would cost more than the lookup.
  if (!found) return Status::NotFound("key not found in " + rep_->path_);
  return Status::OK();
}

Status Reader::FindInMember(size_t member, std::string_view key, uint64_t* index) const {
  if (!rep_->file_set_)
    return Status::InvalidArgument(rep_->path_ + " is not a set of files: look keys up with Find");
  if (member >= rep_->parts_.size())
    return Status::OutOfRange("member " + std::to_string(member) + " out of range for " + rep_->path_ + " (" +
                              std::to_string(rep_->parts_.size()) + " files)");
  Rep::PartPins pins;
  Rep::Part* part = nullptr;
  LMDBLOADER_RETURN_IF_ERROR(rep_->PinSlots(&member, 1, &part, &pins));
  bool found = false;
  LMDBLOADER_RETURN_IF_ERROR(part->index.Find(key, &found, index));
  if (!found) return Status::NotFound("key not found in " + part->location.path);
  if (member > 0) *index += rep_->part_ends_[member - 1];
  return Status::OK();
}

Status Reader::LowerBound(std::string_view key, uint64_t* position) const {
  if (rep_->file_set_)
    return Status::Unsupported(rep_->path_ + " is a set of files, whose keys are each file's own: no order runs "
                               "across them (look keys up with Find, or open one file)");
  if (rep_->parts_.front()->name_keys) {
    // The smallest name >= key over every part.
    uint64_t best = rep_->size_;
    std::string_view best_name;
    for (size_t p = 0; p < rep_->parts_.size(); ++p) {
      const NameKeys& names = *rep_->parts_[p]->name_keys;
      const uint64_t at = names.LowerBound(key);
      if (at >= names.size()) continue;
      if (best == rep_->size_ || names.Name(at) < best_name) {
        best = at + (p == 0 ? 0 : rep_->part_ends_[p - 1]);
        best_name = names.Name(at);
      }
    }
    *position = best;
    return Status::OK();
  }
  if (rep_->parts_.size() == 1) return rep_->parts_[0]->index.LowerBound(key, position);
  uint64_t lo = 0, hi = rep_->size_;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (std::string_view(RecordKey(mid)) < key) lo = mid + 1;
    else hi = mid;
  }
  *position = lo;
  return Status::OK();
}

Status Reader::Get(std::string_view key, std::string* value) {
  uint64_t index = 0;
  LMDBLOADER_RETURN_IF_ERROR(Find(key, &index));
  return Read(index, value);
}

}  // namespace lmdbloader
