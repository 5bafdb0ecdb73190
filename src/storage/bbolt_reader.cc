#include "storage/bbolt_reader.h"

#include <algorithm>
#include <utility>

#include "storage/coding.h"

namespace raftkv {

namespace {

constexpr size_t kPageHeaderBytes = 16;
constexpr size_t kElementBytes = 16;  // a branch element and a leaf element alike
constexpr size_t kMetaBytes = 64;
constexpr size_t kMetaChecksumOffset = 56;  // the checksum covers the fields before it
constexpr size_t kBucketHeaderBytes = 16;
constexpr uint16_t kBranchFlag = 0x01;
constexpr uint16_t kLeafFlag = 0x02;
constexpr uint16_t kMetaFlag = 0x04;
constexpr uint16_t kFreelistFlag = 0x10;
constexpr uint32_t kBucketElementFlag = 0x01;

uint16_t Fixed16(std::string_view s, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[at]) |
                               (static_cast<unsigned char>(s[at + 1]) << 8));
}
uint32_t Fixed32(std::string_view s, size_t at) { return coding::DecodeFixed32(s.data() + at); }
uint64_t Fixed64(std::string_view s, size_t at) { return coding::DecodeFixed64(s.data() + at); }

uint64_t Fnv64a(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string PageType(uint16_t flags) {
  switch (flags) {
    case kBranchFlag: return "branch";
    case kLeafFlag: return "leaf";
    case kMetaFlag: return "meta";
    case kFreelistFlag: return "freelist";
    default: return "unknown (flags " + std::to_string(flags) + ")";
  }
}

// A meta page as read, and why it is not valid (empty: valid).
struct Meta {
  std::string problem;
  uint32_t page_size = 0;
  uint64_t root = 0;
  uint64_t high_water = 0;
  uint64_t txid = 0;
};

// The meta page whose page header starts at `page` (at least
// kPageHeaderBytes + kMetaBytes bytes, or fewer when the file ends).
Meta ParseMeta(std::string_view page) {
  Meta m;
  if (page.size() < kPageHeaderBytes + kMetaBytes) {
    m.problem = "the file ends inside it";
    return m;
  }
  const std::string_view meta = page.substr(kPageHeaderBytes, kMetaBytes);
  if (Fixed32(meta, 0) != BboltReader::kMagic) {
    m.problem = "no bbolt magic";
  } else if (Fixed32(meta, 4) != BboltReader::kVersion) {
    m.problem = "version " + std::to_string(Fixed32(meta, 4)) + " (2 expected)";
  } else if (Fixed64(meta, kMetaChecksumOffset) != Fnv64a(meta.substr(0, kMetaChecksumOffset))) {
    m.problem = "checksum mismatch";
  } else if (Fixed16(page, 8) != kMetaFlag) {
    m.problem = "a " + PageType(Fixed16(page, 8)) + " page, not a meta page";
  }
  m.page_size = Fixed32(meta, 8);
  m.root = Fixed64(meta, 16);
  m.high_water = Fixed64(meta, 40);
  m.txid = Fixed64(meta, 48);
  const bool power_of_two = (m.page_size & (m.page_size - 1)) == 0;
  if (m.problem.empty() && (m.page_size < BboltReader::kMinPageSize ||
                            m.page_size > BboltReader::kMaxPageSize || !power_of_two)) {
    m.problem = "unsupported page size " + std::to_string(m.page_size);
  }
  return m;
}

}  // namespace

bool BboltReader::LooksLikeBbolt(std::string_view head) {
  auto magic_at = [&](size_t page) {
    return head.size() >= page + kPageHeaderBytes + 4 &&
           Fixed32(head, page + kPageHeaderBytes) == kMagic;
  };
  if (magic_at(0)) return true;
  for (uint32_t size = kMinPageSize; size <= kMaxPageSize; size *= 2) {
    if (magic_at(size) && Fixed16(head, size + 8) == kMetaFlag) return true;
  }
  return false;
}

Status BboltReader::OpenFile(const std::string& path, uint64_t size,
                             std::unique_ptr<BboltReader>* out) {
  std::unique_ptr<BboltReader> r(new BboltReader());
  r->name_ = path;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &r->file_);
  uint64_t file_size = 0;
  if (s.ok()) s = r->file_.Size(&file_size);
  if (!s.ok()) return s;
  r->size_ = std::min(size, file_size);
  return Open(std::move(r), out);
}

Status BboltReader::OpenMemory(const std::string& name, std::string_view bytes,
                               std::unique_ptr<BboltReader>* out) {
  std::unique_ptr<BboltReader> r(new BboltReader());
  r->name_ = name;
  r->memory_ = bytes;
  r->in_memory_ = true;
  r->size_ = bytes.size();
  return Open(std::move(r), out);
}

Status BboltReader::Open(std::unique_ptr<BboltReader> r, std::unique_ptr<BboltReader>* out) {
  Status s = r->ReadMeta();
  if (!s.ok()) return s;
  *out = std::move(r);
  return Status::OK();
}

Status BboltReader::Corrupt(const std::string& what) const {
  return Status::Corruption(name_ + ": bbolt database: " + what);
}

Status BboltReader::CorruptPage(uint64_t pgid, const std::string& what) const {
  return Corrupt((pgid == 0 ? std::string("inline bucket page") : "page " + std::to_string(pgid)) +
                 ": " + what);
}

Status BboltReader::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  if (offset > size_ || n > size_ - offset) {
    return Corrupt(std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                   " are beyond its " + std::to_string(size_) + " bytes");
  }
  if (in_memory_) {
    out->assign(memory_.substr(static_cast<size_t>(offset), n));
    return Status::OK();
  }
  Status s = file_.ReadAt(offset, n, out);
  if (s.ok() && out->size() != n) {
    return Status::IOError(name_ + ": short read at offset " + std::to_string(offset) +
                           " (the file changed while it was read)");
  }
  return s;
}

Status BboltReader::ReadMeta() {
  std::string head;
  Status s = ReadAt(0, static_cast<size_t>(std::min<uint64_t>(size_, kDetectBytes)), &head);
  if (!s.ok()) return s;
  Meta meta0 = ParseMeta(head);
  Meta meta1;
  meta1.problem = "not found";
  if (meta0.problem.empty()) {
    std::string page1;
    if (meta0.page_size < size_) {
      s = ReadAt(meta0.page_size,
                 static_cast<size_t>(std::min<uint64_t>(size_ - meta0.page_size,
                                                        kPageHeaderBytes + kMetaBytes)),
                 &page1);
      if (!s.ok()) return s;
    }
    meta1 = ParseMeta(page1);
    if (meta1.problem.empty() && meta1.page_size != meta0.page_size) {
      meta1.problem = "page size " + std::to_string(meta1.page_size) + " differs from page 0's";
    }
  } else {  // page 0 is damaged: page 1 at each page size it may have
    for (uint32_t size = kMinPageSize; size <= kMaxPageSize && size < head.size(); size *= 2) {
      Meta m = ParseMeta(std::string_view(head).substr(size));
      if (m.problem.empty() && m.page_size != size) m.problem = "page size mismatch";
      if (m.problem.empty() || (m.problem != "no bbolt magic" && m.problem != "the file ends inside it" &&
                                meta1.problem == "not found")) {
        meta1 = m;  // the first page 1 with the magic, for the error
      }
      if (m.problem.empty()) break;
    }
  }
  const Meta* chosen = nullptr;
  if (meta0.problem.empty() && (!meta1.problem.empty() || meta0.txid >= meta1.txid)) {
    chosen = &meta0;
  } else if (meta1.problem.empty()) {
    chosen = &meta1;
  } else {
    return Corrupt("no valid meta page (page 0: " + meta0.problem + "; page 1: " +
                   meta1.problem + ")");
  }
  page_size_ = chosen->page_size;
  root_ = chosen->root;
  high_water_ = chosen->high_water;
  txid_ = chosen->txid;
  if (high_water_ > size_ / page_size_) {
    return Corrupt("truncated: its meta page (txid " + std::to_string(txid_) + ") counts " +
                   std::to_string(high_water_) + " pages of " + std::to_string(page_size_) +
                   " bytes, the file holds " + std::to_string(size_) + " bytes");
  }
  if (root_ < 2 || root_ >= high_water_) {
    return Corrupt("the root bucket's page " + std::to_string(root_) + " is outside the " +
                   std::to_string(high_water_) + " pages");
  }
  return Status::OK();
}

Status BboltReader::ReadPage(uint64_t pgid, std::string* page) {
  if (pgid < 2 || pgid >= high_water_) {
    return CorruptPage(pgid, "referenced, but outside the data pages 2.." +
                                 std::to_string(high_water_ - 1));
  }
  if (!visited_.insert(pgid).second) {
    return CorruptPage(pgid, "reached twice (the tree has a cycle or shares a page)");
  }
  const uint64_t offset = pgid * page_size_;
  Status s = ReadAt(offset, kPageHeaderBytes, page);
  if (!s.ok()) return s;
  if (Fixed64(*page, 0) != pgid) {
    return CorruptPage(pgid, "its header says page " + std::to_string(Fixed64(*page, 0)));
  }
  const uint64_t overflow = Fixed32(*page, 12);
  if (overflow >= high_water_ - pgid) {
    return CorruptPage(pgid, "its " + std::to_string(overflow) +
                                 " overflow pages run past the last page " +
                                 std::to_string(high_water_ - 1));
  }
  return ReadAt(offset, static_cast<size_t>((overflow + 1) * page_size_), page);
}

Status BboltReader::WalkPage(uint64_t pgid, std::string_view inline_page, int depth,
                             const Visitor& visit) {
  if (depth > kMaxDepth) {
    return CorruptPage(pgid, "the tree is deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (pgid == 0) return WalkElements(0, inline_page, depth, visit);
  std::string page;
  Status s = ReadPage(pgid, &page);
  if (!s.ok()) return s;
  return WalkElements(pgid, page, depth, visit);
}

// A page's element `i`: where its key starts, its key's and its value's size.
struct BboltReader::Element {
  uint64_t at = 0;  // of the key
  uint64_t key_size = 0;
  uint64_t value_size = 0;
};

Status BboltReader::CheckElements(uint64_t pgid, std::string_view page,
                                  std::vector<Element>* elements) const {
  if (page.size() < kPageHeaderBytes) return CorruptPage(pgid, "shorter than a page header");
  const uint16_t flags = Fixed16(page, 8);
  const uint64_t count = Fixed16(page, 10);
  if (flags != kLeafFlag && (flags != kBranchFlag || pgid == 0)) {
    return CorruptPage(pgid, "a " + PageType(flags) + " page where the tree needs " +
                                 (pgid == 0 ? "a leaf" : "a branch or a leaf"));
  }
  if (kPageHeaderBytes + count * kElementBytes > page.size()) {
    return CorruptPage(pgid, std::to_string(count) + " elements do not fit in its " +
                                 std::to_string(page.size()) + " bytes");
  }
  if (flags == kBranchFlag && count == 0) return CorruptPage(pgid, "a branch page without elements");
  // The keys and values of a page's elements do not overlap: in all they
  // fit in the page after the elements, so no walk reads more than the file.
  const uint64_t room = page.size() - kPageHeaderBytes - count * kElementBytes;
  uint64_t data_bytes = 0;
  const bool branch = flags == kBranchFlag;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = kPageHeaderBytes + i * kElementBytes;
    const std::string_view e = page.substr(static_cast<size_t>(at), kElementBytes);
    Element el;
    el.at = at + Fixed32(e, branch ? 0 : 4);
    el.key_size = Fixed32(e, branch ? 4 : 8);
    el.value_size = branch ? 0 : Fixed32(e, 12);
    if (el.at + el.key_size + el.value_size > page.size()) {
      return CorruptPage(pgid, "element " + std::to_string(i) + " (key of " +
                                   std::to_string(el.key_size) + " bytes, value of " +
                                   std::to_string(el.value_size) + " at +" +
                                   std::to_string(el.at - at) + ") runs past the page's " +
                                   std::to_string(page.size()) + " bytes");
    }
    data_bytes += el.key_size + el.value_size;
    if (data_bytes > room) {
      return CorruptPage(pgid, "the keys and values of its first " + std::to_string(i + 1) +
                                   " elements take " + std::to_string(data_bytes) +
                                   " bytes, more than the page holds after its elements");
    }
    elements->push_back(el);
  }
  return Status::OK();
}

Status BboltReader::WalkElements(uint64_t pgid, std::string_view page, int depth,
                                 const Visitor& visit) {
  std::vector<Element> elements;
  Status s = CheckElements(pgid, page, &elements);
  const bool branch = s.ok() && Fixed16(page, 8) == kBranchFlag;
  for (size_t i = 0; s.ok() && i < elements.size(); ++i) {
    const Element& el = elements[i];
    const std::string_view key = page.substr(static_cast<size_t>(el.at), static_cast<size_t>(el.key_size));
    if (branch) {
      s = WalkPage(Fixed64(page, kPageHeaderBytes + i * kElementBytes + 8), {}, depth + 1, visit);
    } else {
      const std::string_view value = page.substr(static_cast<size_t>(el.at + el.key_size),
                                                 static_cast<size_t>(el.value_size));
      const uint32_t flags = Fixed32(page, kPageHeaderBytes + i * kElementBytes);
      s = visit(key, value, (flags & kBucketElementFlag) != 0);
    }
  }
  return s;
}

Status BboltReader::Walk(std::string_view bucket_value, bool root, const Visitor& visit) {
  if (root) return WalkPage(root_, {}, 0, visit);
  if (bucket_value.size() < kBucketHeaderBytes) {
    return Corrupt("a bucket value of " + std::to_string(bucket_value.size()) +
                   " bytes, shorter than a bucket header");
  }
  const uint64_t pgid = Fixed64(bucket_value, 0);
  if (pgid != 0) return WalkPage(pgid, {}, 1, visit);
  return WalkPage(0, bucket_value.substr(kBucketHeaderBytes), 1, visit);
}

Status BboltReader::ForEach(std::string_view name, bool* found, const Visitor& visit) {
  *found = false;
  visited_.clear();
  std::string bucket;
  Status s = Walk({}, true, [&](std::string_view key, std::string_view value, bool is_bucket) {
    if (key != name) return Status::OK();
    if (!is_bucket) return Corrupt("the root's key '" + std::string(name) + "' is not a bucket");
    if (*found) return Corrupt("the root holds bucket '" + std::string(name) + "' twice");
    *found = true;
    bucket.assign(value);
    return Status::OK();
  });
  if (!s.ok() || !*found) return s;
  // visited_ keeps the root's pages: a bucket may not reach them either.
  s = Walk(bucket, false, visit);
  if (s.IsCorruption()) {
    return Status::Corruption(s.message() + " (in bucket '" + std::string(name) + "')");
  }
  return s;
}

}  // namespace raftkv
