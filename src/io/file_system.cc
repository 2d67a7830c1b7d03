#include "io/file_system.h"

#include <sys/vfs.h>

#include <cstdint>

namespace lmdbloader {

namespace {

// f_type values: linux/magic.h for the kernel's own (NFS, SMB/CIFS, Ceph,
// 9p, AFS, Coda, FUSE), and the vendors' headers for the rest (Lustre's
// LL_SUPER_MAGIC, GPFS's "GPFS" in ASCII, BeeGFS's and OrangeFS's).
struct Remote {
  uint32_t magic;
  const char* name;
};
constexpr Remote kRemote[] = {
    {0x6969, "nfs"},          {0x517B, "smb"},         {0xFF534D42, "cifs"},   {0xFE534D42, "smb2"},
    {0x00C36400, "ceph"},     {0x0BD00BD0, "lustre"},  {0x47504653, "gpfs"},   {0x19830326, "beegfs"},
    {0x20030528, "orangefs"}, {0x01021997, "9p"},      {0x5346414F, "afs"},    {0x6B414653, "afs"},
    {0x73757245, "coda"},     {0x65735546, "fuse"},
};

}  // namespace

FileSystemKind FileSystemOf(const std::string& path) {
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return {false, "local"};
  const uint32_t type = static_cast<uint32_t>(fs.f_type);
  for (const Remote& r : kRemote)
    if (r.magic == type) return {true, r.name};
  return {false, "local"};
}

}  // namespace lmdbloader
