#include "storage/overlay_view.h"

#include <utility>

#include "glog/logging.h"

namespace raftkv {

// Merges the base iterator and the pending rows in [lower, upper): a pending
// row hides the base's row of the same key, a pending deletion hides it and
// is skipped.
class OverlayView::Iterator final : public BackendIterator {
 public:
  Iterator(std::shared_ptr<const OverlayView> view, std::string_view lower,
           std::string_view upper, bool lookup)
      : view_(std::move(view)), lower_(lower), upper_(upper), lookup_(lookup),
        base_(view_->BorrowBase(lookup)), row_(view_->rows_.end()) {}
  ~Iterator() override { view_->ReturnBase(lookup_, std::move(base_)); }

  void Seek(std::string_view target) override {
    const std::string_view from = target < std::string_view(lower_) ? lower_ : target;
    base_->Seek(from);
    row_ = view_->rows_.lower_bound(from);
    Settle();
  }
  bool Valid() const override { return at_ != At::kNone; }
  void Next() override {
    if (at_ == At::kRow) {
      ++row_;
    } else {
      base_->Next();
    }
    Settle();
  }
  std::string_view key() const override {
    return at_ == At::kRow ? std::string_view(row_->first) : base_->key();
  }
  std::string_view value() const override {
    return at_ == At::kRow ? std::string_view(*row_->second) : base_->value();
  }
  Status status() const override { return base_->status(); }

 private:
  enum class At { kNone, kBase, kRow };
  bool Below(std::string_view key) const { return upper_.empty() || key < upper_; }

  void Settle() {
    for (;;) {
      if (!base_->status().ok()) {
        at_ = At::kNone;
        return;
      }
      const bool base = base_->Valid() && Below(base_->key());
      const bool row = row_ != view_->rows_.end() && Below(row_->first);
      if (!row || (base && base_->key() < std::string_view(row_->first))) {
        at_ = base ? At::kBase : At::kNone;
        return;
      }
      if (base && base_->key() == std::string_view(row_->first)) base_->Next();
      if (row_->second.has_value()) {
        at_ = At::kRow;
        return;
      }
      ++row_;  // a pending deletion
    }
  }

  const std::shared_ptr<const OverlayView> view_;
  const std::string lower_;
  const std::string upper_;
  const bool lookup_;
  std::unique_ptr<BackendIterator> base_;
  Rows::const_iterator row_;
  At at_ = At::kNone;
};

OverlayView::OverlayView(std::shared_ptr<const BackendView> base) : base_(std::move(base)) {}

OverlayView::~OverlayView() = default;

bool OverlayView::HasDeleteRange(const BackendBatch& batch) {
  for (const BackendBatch::Op& op : batch.ops()) {
    if (op.type == BackendBatch::OpType::kDeleteRange) return true;
  }
  return false;
}

void OverlayView::Add(BackendBatch&& batch) {
  bytes_ += batch.bytes();
  for (BackendBatch::Op& op : batch.TakeOps()) {
    CHECK(op.type != BackendBatch::OpType::kDeleteRange) << "a range deletion cannot be laid over";
    std::optional<std::string> value;
    if (op.type == BackendBatch::OpType::kPut) value = std::move(op.value);
    rows_.insert_or_assign(std::move(op.key), std::move(value));
  }
}

void OverlayView::Drain(BackendBatch* out) {
  for (auto& [key, value] : rows_) {
    if (value.has_value()) {
      out->Put(key, std::move(*value));
    } else {
      out->Delete(key);
    }
  }
  rows_.clear();
  bytes_ = 0;
}

Status OverlayView::Get(std::string_view key, std::string* value, bool* found) const {
  if (auto row = rows_.find(key); row != rows_.end()) {
    *found = row->second.has_value();
    if (*found) *value = *row->second;
    return Status::OK();
  }
  return base_->Get(key, value, found);
}

std::unique_ptr<BackendIterator> OverlayView::NewIterator(std::string_view lower,
                                                          std::string_view upper) const {
  return std::make_unique<Iterator>(shared_from_this(), lower, upper, /*lookup=*/false);
}

// The pending rows are few and in a map: a lookup's saving is the base's.
std::unique_ptr<BackendIterator> OverlayView::NewLookupIterator(std::string_view lower,
                                                                std::string_view upper) const {
  return std::make_unique<Iterator>(shared_from_this(), lower, upper, /*lookup=*/true);
}

std::unique_ptr<BackendIterator> OverlayView::BorrowBase(bool lookup) const {
  auto& idle = lookup ? idle_lookups_ : idle_;
  if (idle.empty()) return lookup ? base_->NewLookupIterator("", "") : base_->NewIterator("", "");
  std::unique_ptr<BackendIterator> it = std::move(idle.back());
  idle.pop_back();
  return it;
}

void OverlayView::ReturnBase(bool lookup, std::unique_ptr<BackendIterator> it) const {
  (lookup ? idle_lookups_ : idle_).push_back(std::move(it));
}

}  // namespace raftkv
