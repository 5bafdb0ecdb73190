// OverlayView: the writes of several batches not yet written, readable over
// the view they will be written on. The apply thread gathers an apply pass's
// entries here so that the store gets one Write() per pass instead of one per
// entry, while each entry still reads the writes of the entries before it
// (doc/storage.md, the data directory).
//
// Only puts and deletes can be laid over a view; a batch holding a range
// deletion must be written instead (see HasDeleteRange).
//
// Thread safety: none. Unlike other views this one changes (Add); an
// iterator it made must be destroyed before the next Add() or Drain().
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/kv_backend.h"

namespace raftkv {

class OverlayView final : public BackendView,
                          public std::enable_shared_from_this<OverlayView> {
 public:
  explicit OverlayView(std::shared_ptr<const BackendView> base);
  ~OverlayView() override;

  // Whether `batch` holds a range deletion, which Add() cannot take.
  static bool HasDeleteRange(const BackendBatch& batch);

  // Lays `batch` over the view (a later write to a key replaces an earlier
  // one). Requires !HasDeleteRange(batch).
  void Add(BackendBatch&& batch);
  bool empty() const { return rows_.empty(); }
  // The keys and values added so far (rows written twice count twice).
  size_t bytes() const { return bytes_; }
  // Moves every pending row into `out`, in key order (the same state as the
  // batches added, in order), and leaves the overlay empty.
  void Drain(BackendBatch* out);

  Status Get(std::string_view key, std::string* value, bool* found) const override;
  std::unique_ptr<BackendIterator> NewIterator(std::string_view lower,
                                               std::string_view upper) const override;
  std::unique_ptr<BackendIterator> NewLookupIterator(std::string_view lower,
                                                     std::string_view upper) const override;

 private:
  class Iterator;
  using Rows = std::map<std::string, std::optional<std::string>, std::less<>>;  // nullopt: deleted

  // An unbounded iterator of the base view, reused: creating one is the
  // costly part of a read on some engines (RocksDB builds a merging
  // iterator over every memtable and file).
  // One pool of each kind: `lookup` ones are the base's lookup iterators.
  std::unique_ptr<BackendIterator> BorrowBase(bool lookup) const;
  void ReturnBase(bool lookup, std::unique_ptr<BackendIterator> it) const;

  const std::shared_ptr<const BackendView> base_;
  Rows rows_;
  size_t bytes_ = 0;
  mutable std::vector<std::unique_ptr<BackendIterator>> idle_;
  mutable std::vector<std::unique_ptr<BackendIterator>> idle_lookups_;
};

}  // namespace raftkv
