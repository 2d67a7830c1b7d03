#include "io/residency.h"

#include <sys/mman.h>

#include <algorithm>
#include <utility>

namespace lmdbloader {

ResidencyGovernor::ResidencyGovernor(uint64_t allowance, uint64_t window_bytes)
    : allowance_(allowance), window_(window_bytes) {}

Status ResidencyGovernor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  LMDBLOADER_RETURN_IF_ERROR(statm_.Open());
  uint64_t rss = 0;
  LMDBLOADER_RETURN_IF_ERROR(statm_.Read(&rss, &baseline_file_rss_));
  for (Slot& s : slots_) std::fill(s.last_touch.begin(), s.last_touch.end(), 0);
  return Status::OK();
}

void ResidencyGovernor::Attach(size_t slot, const char* base, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slots_.size() <= slot) slots_.resize(slot + 1);
  slots_[slot].base = base;
  slots_[slot].length = length;
  slots_[slot].last_touch.assign(length / window_ + 1, 0);
}

Status ResidencyGovernor::Touched(size_t slot, uint64_t offset, uint64_t length) {
  if (allowance_ == 0) return Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  ++tick_;
  std::vector<uint64_t>& touch = slots_[slot].last_touch;
  // A touch maps the whole folio around it, up to a 2 MiB-aligned 2 MiB:
  // mark every window that span reaches, or pages mapped beside the record
  // would never be released.
  const uint64_t begin = offset / kMaxFolio * kMaxFolio;
  const uint64_t end = (offset + std::max<uint64_t>(length, 1) + kMaxFolio - 1) / kMaxFolio * kMaxFolio;
  for (uint64_t w = begin / window_; w <= (end - 1) / window_ && w < touch.size(); ++w) touch[w] = tick_;
  uint64_t rss = 0, file_rss = 0;
  LMDBLOADER_RETURN_IF_ERROR(statm_.Read(&rss, &file_rss));
  uint64_t grown = file_rss > baseline_file_rss_ ? file_rss - baseline_file_rss_ : 0;
  if (grown <= allowance_) return Status::OK();
  return ReleaseLocked(grown);
}

Status ResidencyGovernor::ReleaseLocked(uint64_t grown) {
  // Release least recently used windows until the process is back to half the
  // allowance, so that the next release is not one read away.
  const uint64_t target = allowance_ / 2;
  std::vector<std::pair<uint64_t, std::pair<size_t, uint64_t>>> order;  // (tick, (slot, window))
  for (size_t s = 0; s < slots_.size(); ++s)
    for (uint64_t w = 0; w < slots_[s].last_touch.size(); ++w)
      if (slots_[s].last_touch[w] != 0) order.push_back({slots_[s].last_touch[w], {s, w}});
  std::sort(order.begin(), order.end());
  uint64_t rss = 0, file_rss = 0;
  for (const auto& entry : order) {
    Slot& slot = slots_[entry.second.first];
    uint64_t begin = entry.second.second * window_;
    uint64_t len = std::min(window_, slot.length - begin);
    ::madvise(const_cast<char*>(slot.base) + begin, len, MADV_DONTNEED);
    slot.last_touch[entry.second.second] = 0;
    ++drops_;
    LMDBLOADER_RETURN_IF_ERROR(statm_.Read(&rss, &file_rss));
    grown = file_rss > baseline_file_rss_ ? file_rss - baseline_file_rss_ : 0;
    if (grown <= target) break;
  }
  return Status::OK();
}

void ResidencyGovernor::ReleaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_) {
    if (s.base && s.length) ::madvise(const_cast<char*>(s.base), s.length, MADV_DONTNEED);
    std::fill(s.last_touch.begin(), s.last_touch.end(), 0);
  }
  ++drops_;
}

uint64_t ResidencyGovernor::drops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drops_;
}

}  // namespace lmdbloader
