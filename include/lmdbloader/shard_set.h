// A shard set: corpora named part-IIIII-of-NNNNN in one folder, with the
// shard list (`shards.json`) that makes them one dataset for a Reader. Shard
// jobs (`lmdbloader convert --shard-index I`, one per SLURM array task or
// rank) write the parts; one final step writes the list.
#ifndef LMDBLOADER_SHARD_SET_H_
#define LMDBLOADER_SHARD_SET_H_

#include <cstdint>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// "part-00003-of-00016": five digits, so at most kMaxShards shards.
std::string ShardName(uint32_t index, uint32_t count);
inline constexpr uint32_t kMaxShards = 99999;

// Writes <folder>/shards.json (atomic_write.h) listing the part-* corpora in
// the folder, after checking that they form one complete set; `records` gets
// their records summed. InvalidArgument naming the folder for a missing part,
// parts of different sets, or a part that is not a corpus; errors as for
// Reader::Open for a part that does not open.
Status WriteShardList(const std::string& folder, uint64_t* records);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SHARD_SET_H_
