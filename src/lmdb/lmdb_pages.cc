#include "lmdb/lmdb_pages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "io/batch_io.h"
#include "io/open_file.h"
#include "lmdb/lmdb_page_layout.h"

namespace lmdbloader {

using namespace lmdb_layout;  // NOLINT: this file is the layout's reader

bool LmdbTree::Parse(std::string_view b, LmdbTree* t) {
  if (b.size() != kDiskSize) return false;
  const char* p = b.data();
  t->pad = Load<uint32_t>(p);
  t->flags = Load<uint16_t>(p + 4);
  t->depth = Load<uint16_t>(p + 6);
  t->branch_pages = Load<uint64_t>(p + 8);
  t->leaf_pages = Load<uint64_t>(p + 16);
  t->overflow_pages = Load<uint64_t>(p + 24);
  t->entries = Load<uint64_t>(p + 32);
  t->root = Load<uint64_t>(p + 40);
  return true;
}

LmdbFile::~LmdbFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status LmdbFile::Open(const std::string& data_path) {
  path_ = data_path;
  struct stat st;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(data_path, &fd_, &st));
  file_size_ = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

Status LmdbFile::Damaged(uint64_t pgno, const std::string& what) const {
  return Status::Corruption("walk " + path_ + ": damaged LMDB page " + std::to_string(pgno) + ": " + what);
}

Status LmdbFile::ReadPages(const uint64_t* pgnos, uint64_t count, uint32_t page_size, std::string* into) {
  into->resize(count * page_size);
  // Neighbouring pages go as one request, up to kMaxReadBytes.
  std::vector<ReadRequest> requests;
  for (uint64_t i = 0; i < count;) {
    uint64_t run = 1;
    while (i + run < count && pgnos[i + run] == pgnos[i] + run && (run + 1) * page_size <= kMaxReadBytes) ++run;
    ReadRequest r;
    r.fd = fd_;
    r.offset = pgnos[i] * page_size;
    r.size = run * page_size;
    r.dst = into->data() + i * page_size;
    r.path = &path_;
    requests.push_back(r);
    i += run;
  }
  if (io_ && requests.size() > 1) return io_->ReadAll(requests.data(), requests.size());
  for (const ReadRequest& r : requests) LMDBLOADER_RETURN_IF_ERROR(PreadFully(r));
  return Status::OK();
}

Status ReadCommittedTxnid(int fd, const char* mapped_meta_pages, uint32_t page_size, uint32_t header_size,
                          const std::string& path, uint64_t* txnid) {
  uint64_t ids[2];
  for (int m = 0; m < 2; ++m) {
    const uint64_t at = m * uint64_t{page_size} + LmdbMetaTxnidAt(header_size);
    if (mapped_meta_pages) {
      ids[m] = Load<uint64_t>(mapped_meta_pages + at);
    } else if (::pread(fd, &ids[m], 8, static_cast<off_t>(at)) != 8) {
      return Status::FromErrno(errno ? errno : EIO, "pread", path);
    }
  }
  *txnid = std::max(ids[0], ids[1]);
  return Status::OK();
}

Status LmdbFile::ReadMeta(uint64_t want_txnid, LmdbMeta* out) {
  const std::string not_lmdb = "open " + path_ + ": not an LMDB file";
  const auto not_lmdb_because = [&](const std::string& why) {
    return Status::Corruption(not_lmdb + " (" + why + ")").WithReason(Status::Reason::kNotLmdb);
  };
  if (file_size_ == 0) return not_lmdb_because("it is empty");
  // Page 0 and, where pages are 4 KiB (nearly every file), the second meta
  // page in one read: a set of 10^5 files reads every file's meta at open.
  char first[kUsualPageSize + kMetaSize10];
  if (file_size_ < kMetaSize) return not_lmdb_because("only " + std::to_string(file_size_) + " bytes");
  const size_t got = static_cast<size_t>(std::min<uint64_t>(file_size_, sizeof first));
  std::memset(first, 0, kMetaSize10);
  if (::pread(fd_, first, got, 0) != static_cast<ssize_t>(got))
    return Status::FromErrno(errno ? errno : EIO, "pread", path_);
  // The format from where the meta sits: after a 16-byte page header (LMDB
  // 0.9, data format 1) or a 24-byte one (LMDB 1.0, data format 3).
  uint64_t hsize = kHeaderSize;
  uint32_t format = kDataVersion;
  if (Load<uint32_t>(first + kHeaderSize) != kMagic && Load<uint32_t>(first + kHeaderSize10) == kMagic &&
      Load<uint32_t>(first + kHeaderSize10 + 4) == kDataVersion10) {
    hsize = kHeaderSize10;
    format = kDataVersion10;
  }
  const size_t meta_size = hsize + (kMetaSize - kHeaderSize);  // through mm_txnid
  const uint32_t page_size = Load<uint32_t>(first + hsize + 24);  // the free tree's pad
  LmdbMeta metas[2];
  for (int m = 0; m < 2; ++m) {
    char buf[kMetaSize10];
    const std::string which = "meta page " + std::to_string(m);
    if (m == 0) {
      std::memcpy(buf, first, sizeof buf);
    } else {
      if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
        return Status::Corruption("open " + path_ + ": damaged meta page 0: page size " +
                                  std::to_string(page_size) + " is not a power of two in [512, 65536]");
      if (file_size_ < 2ull * page_size)
        return Status::Corruption("open " + path_ + ": truncated: " + std::to_string(file_size_) +
                                  " bytes hold no second meta page");
      if (page_size + meta_size <= got)
        std::memcpy(buf, first + page_size, meta_size);
      else if (::pread(fd_, buf, meta_size, page_size) != static_cast<ssize_t>(meta_size))
        return Status::FromErrno(errno ? errno : EIO, "pread", path_);
    }
    PageHeader h = PageHeader::Parse(buf, hsize, 0);  // flags only
    if (!(h.flags & kPageMeta) || Load<uint32_t>(buf + hsize) != kMagic) {
      if (m == 0) {
        // Another LMDB data format than 0.9's and 1.0's (a future one, or
        // MDB_DEVEL's 999) may sit after a header of another length.
        for (size_t at = 0; at + 8 <= 64; at += 4) {
          if (at == kHeaderSize || Load<uint32_t>(first + at) != kMagic) continue;
          const uint32_t other = Load<uint32_t>(first + at + 4);
          return Status::Unsupported("open " + path_ + ": LMDB data format " + std::to_string(other) +
                                     " is not supported: lmdbloader reads LMDB 0.9 files (data format 1) and "
                                     "LMDB 1.0 files (data format 3)")
              .WithReason(Status::Reason::kLmdbFormat, other);
        }
        return not_lmdb_because("no LMDB meta page at offset 0");
      }
      return Status::Corruption("open " + path_ + ": damaged " + which + " (bad flags or magic)");
    }
    uint32_t version = Load<uint32_t>(buf + hsize + 4);
    if (version != format)
      return Status::Corruption("open " + path_ + ": " + which + " has LMDB format version " +
                                std::to_string(version) + ", meta page 0 has version " + std::to_string(format));
    LmdbMeta& meta = metas[m];
    meta.format = format;
    meta.header_size = static_cast<uint32_t>(hsize);
    meta.page = m;
    meta.map_size = Load<uint64_t>(buf + hsize + 16);
    LmdbTree::Parse(std::string_view(buf + hsize + 24, LmdbTree::kDiskSize), &meta.free_tree);
    LmdbTree::Parse(std::string_view(buf + hsize + 72, LmdbTree::kDiskSize), &meta.main_tree);
    meta.last_pgno = Load<uint64_t>(buf + hsize + 120);
    meta.txnid = Load<uint64_t>(buf + LmdbMetaTxnidAt(meta.header_size));
    meta.page_size = meta.free_tree.pad;
    meta.sum = Checksum(buf, meta_size);
  }
  // LMDB reads the meta with the higher transaction id.
  int pick = metas[1].txnid > metas[0].txnid ? 1 : 0;
  if (want_txnid != 0) {
    if (metas[0].txnid == want_txnid) pick = 0;
    else if (metas[1].txnid == want_txnid) pick = 1;
    else return Status::NotFound("open " + path_ + ": no meta page holds transaction " + std::to_string(want_txnid));
  }
  LmdbMeta& meta = metas[pick];
  const std::string where = "open " + path_ + ": damaged meta page " + std::to_string(pick) + ": ";
  if (format == kDataVersion10) {
    // What LMDB 1.0 can add to a file that nothing here can undo: pages
    // encrypted with the writer's key, or checked by the writer's own
    // checksum function (its size kept in the last 2 bytes of page 0).
    if (meta.free_tree.flags & kEnvEncrypted)
      return Status::Unsupported("open " + path_ + ": the LMDB 1.0 file is encrypted (MDB_ENCRYPT): lmdbloader "
                                 "cannot decrypt its pages")
          .WithReason(Status::Reason::kLmdbFormat, format);
    uint16_t sum_size = 0;
    if (page_size <= got)
      std::memcpy(&sum_size, first + page_size - 2, 2);
    else if (::pread(fd_, &sum_size, 2, static_cast<off_t>(page_size) - 2) != 2)
      return Status::FromErrno(errno ? errno : EIO, "pread", path_);
    if (sum_size != 0)
      return Status::Unsupported("open " + path_ + ": the LMDB 1.0 file carries page checksums of " +
                                 std::to_string(sum_size) + " bytes from the writer's own checksum function "
                                 "(mdb_env_set_checksum), which lmdbloader cannot compute")
          .WithReason(Status::Reason::kLmdbFormat, format);
  }
  if (meta.page_size != page_size)
    return Status::Corruption(where + "page size " + std::to_string(meta.page_size) + " differs from meta page 0's " +
                              std::to_string(page_size));
  // The meta page's last page may lie past the end of the file: liblmdb
  // counts pages that a transaction allocated and freed again without ever
  // writing them (seen after deletes). What must lie inside the file is every
  // page the trees reach, and the walk checks each one it reads. It never
  // lies past the map size the same meta page records: liblmdb allocates no
  // page beyond its map (MDB_MAP_FULL) and grows a smaller map to the last
  // page at open.
  if (meta.last_pgno < 1 || meta.last_pgno >= meta.map_size / page_size)
    return Status::Corruption("open " + path_ + ": truncated or damaged: meta page " + std::to_string(pick) +
                              " says the last page is " + std::to_string(meta.last_pgno) + ", past its own map of " +
                              std::to_string(meta.map_size) + " bytes (the file has " +
                              std::to_string(file_size_ / page_size) + " pages of " + std::to_string(page_size) +
                              " bytes)");
  // The free-page tree maps transaction ids to page lists: never sorted
  // duplicates (liblmdb asserts on such a tree when it walks it).
  if (meta.free_tree.flags & kLmdbDupSort)
    return Status::Corruption(where + "the free-page tree claims sorted duplicates (flags " +
                              std::to_string(meta.free_tree.flags) + ")");
  for (const LmdbTree* t : {&meta.main_tree, &meta.free_tree}) {
    const char* name = t == &meta.main_tree ? "main" : "free-page";
    if (t->root == kInvalidPage) {
      if (t->entries != 0 || t->depth != 0)
        return Status::Corruption(where + "the empty " + std::string(name) + " tree claims entries");
      continue;
    }
    if (t->root < 2 || t->root > meta.last_pgno)
      return Status::Corruption(where + "the " + std::string(name) + " tree's root page " + std::to_string(t->root) +
                                " is outside pages 2.." + std::to_string(meta.last_pgno));
    if (t->depth < 1 || t->depth > kMaxDepth)
      return Status::Corruption(where + "the " + std::string(name) + " tree's depth " + std::to_string(t->depth) +
                                " is outside 1..32");
  }
  // The walk's bound on the file is its size now, not at Open: a writer
  // writes every page a commit's trees reach before that commit's meta page
  // (mdb_txn_commit: mdb_page_flush, then mdb_env_write_meta), growing the
  // file as it goes, so a size taken after reading the meta page covers the
  // snapshot, where one taken before it can miss the pages of a commit made
  // in between (a sound file then read as truncated).
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat", path_);
  file_size_ = static_cast<uint64_t>(st.st_size);
  *out = meta;
  return Status::OK();
}

Status LmdbFile::FindNamedTree(const LmdbMeta& meta, std::string_view name, LmdbTree* tree) {
  bool found = false;
  // LMDB 1.0 keeps a database's name with its terminating NUL (mdb_dbi_open
  // takes strlen + 1 bytes), and py-lmdb 3 lists it so: b"name\0".
  std::string key(name);
  if (meta.format == kDataVersion10) key.push_back('\0');
  Status s = Walk(meta, meta.main_tree, [&](const LmdbItem& item) -> Status {
    if (!item.named_database || item.key != key) return Status::OK();
    if (!LmdbTree::Parse(item.value, tree))
      return Status::Corruption("walk " + path_ + ": the header of database '" + std::string(name) + "' is damaged");
    found = true;
    return Status::Unsupported("");  // stops the walk
  });
  if (found) {
    if (tree->root != kInvalidPage &&
        (tree->root < 2 || tree->root > meta.last_pgno || tree->depth < 1 || tree->depth > kMaxDepth))
      return Status::Corruption("walk " + path_ + ": the header of database '" + std::string(name) +
                                "' is damaged (root page " + std::to_string(tree->root) + ", depth " +
                                std::to_string(tree->depth) + ")");
    return Status::OK();
  }
  if (!s.ok()) return s;
  return Status::NotFound("open " + path_ + ": no database named '" + std::string(name) + "'");
}

}  // namespace lmdbloader
