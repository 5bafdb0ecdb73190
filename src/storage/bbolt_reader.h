// A reader of bbolt database files (the storage of etcd v3: `member/snap/db`
// and the file `etcdctl snapshot save` writes), for importing an etcd
// snapshot. Read only, and for hostile input: every page id, offset, element
// count, key and value length and overflow is checked against the file, a
// page reached twice (a cycle) or a tree deeper than kMaxDepth is an error,
// and no allocation is sized by a field beyond what the file holds. Errors
// are Status::Corruption naming the file, the page and what is wrong.
//
// The layout (bbolt, little endian):
//   page     := id:u64 flags:u16 count:u16 overflow:u32 data...; a page with
//               overflow n spans n + 1 pages of the database's page size.
//               flags: 0x01 branch, 0x02 leaf, 0x04 meta, 0x10 freelist.
//   meta     (pages 0 and 1, after the page header) := magic:u32 (0xED0CDAED)
//               version:u32 (2) page_size:u32 flags:u32 root:bucket
//               freelist:u64 pgid:u64 (the high water mark) txid:u64
//               checksum:u64 (FNV-64a of the fields before it). The valid
//               one with the higher txid is the database.
//   branch element (count of them after the header) := pos:u32 ksize:u32
//               pgid:u64; the key at the element's address + pos.
//   leaf element := flags:u32 pos:u32 ksize:u32 vsize:u32; the key at the
//               element's address + pos, the value right after it. flags
//               0x01: the value is a bucket.
//   bucket   := root:u64 sequence:u64; root 0: an inline bucket, whose leaf
//               page follows in the value itself.
// The database's top level is the root bucket, whose keys name buckets.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "storage/file_util.h"

namespace raftkv {

class BboltReader {
 public:
  static constexpr uint32_t kMagic = 0xED0CDAED;
  static constexpr uint32_t kVersion = 2;
  static constexpr uint32_t kMinPageSize = 512;
  static constexpr uint32_t kMaxPageSize = 64 * 1024;
  // Deeper than any real tree (a bbolt tree of a billion keys is below 10).
  static constexpr int kMaxDepth = 32;
  // Enough of a file's head to tell a bbolt database (LooksLikeBbolt).
  static constexpr size_t kDetectBytes = kMaxPageSize + 80;

  // Whether `head` (the first bytes of a file, up to kDetectBytes) holds a
  // bbolt meta page: the magic at page 0, or at page 1 for one of the page
  // sizes. Content only; nothing else is checked.
  static bool LooksLikeBbolt(std::string_view head);

  // Opens the first `size` bytes of the file at `path` (the database
  // without what follows it, such as etcd's SHA-256) and reads its meta.
  static Status OpenFile(const std::string& path, uint64_t size, std::unique_ptr<BboltReader>* out);
  // The same over bytes in memory, named `name` in errors; `bytes` must
  // outlive the reader.
  static Status OpenMemory(const std::string& name, std::string_view bytes,
                           std::unique_ptr<BboltReader>* out);

  const std::string& name() const { return name_; }
  uint32_t page_size() const { return page_size_; }
  uint64_t txid() const { return txid_; }
  uint64_t page_count() const { return high_water_; }

  // Called for each key of a bucket in the file's order; a non-OK status
  // stops the walk and is returned. `is_bucket`: the value is a nested
  // bucket's header (not followed).
  using Visitor =
      std::function<Status(std::string_view key, std::string_view value, bool is_bucket)>;
  // Walks the top-level bucket `name`; *found is false (and OK) when the
  // database has no such bucket.
  Status ForEach(std::string_view name, bool* found, const Visitor& visit);

 private:
  BboltReader() = default;
  static Status Open(std::unique_ptr<BboltReader> r, std::unique_ptr<BboltReader>* out);
  Status ReadAt(uint64_t offset, size_t n, std::string* out) const;
  Status ReadMeta();
  // The page `pgid` with its overflow pages into *page.
  Status ReadPage(uint64_t pgid, std::string* page);
  // Walks the tree under page `pgid` (inline: the page in `inline_page`).
  Status WalkPage(uint64_t pgid, std::string_view inline_page, int depth, const Visitor& visit);
  struct Element;
  // The elements of `page` (page `pgid`; 0: an inline page), each checked
  // against the page, before any is visited.
  Status CheckElements(uint64_t pgid, std::string_view page, std::vector<Element>* elements) const;
  Status WalkElements(uint64_t pgid, std::string_view page, int depth, const Visitor& visit);
  Status Walk(std::string_view bucket_value, bool root, const Visitor& visit);
  Status Corrupt(const std::string& what) const;
  Status CorruptPage(uint64_t pgid, const std::string& what) const;

  std::string name_;
  uint64_t size_ = 0;
  file::File file_;
  std::string_view memory_;
  bool in_memory_ = false;
  uint32_t page_size_ = 0;
  uint64_t root_ = 0;
  uint64_t high_water_ = 0;
  uint64_t txid_ = 0;
  std::unordered_set<uint64_t> visited_;  // pages of the current walk
};

}  // namespace raftkv
