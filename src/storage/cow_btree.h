// CowBTree: an ordered map whose copies are O(1) and share structure (a
// persistent B+tree with copy-on-write nodes).
//
// Copying a CowBTree shares its root. A later change to either copy clones
// only the nodes on its path that are still shared (at most one node per
// level, each at most kMaxEntries entries), so a copy taken as an immutable
// image -- a snapshot capture -- costs nothing up front and the writer keeps
// going; the image's nodes are freed when its last holder drops them.
//
// Thread safety: like a std::map for one object. Different CowBTree objects
// that share nodes may be used from different threads at the same time: a
// shared node is never changed (the writer checks, with an acquire load of
// its reference count, that it is the only holder before it changes a node
// in place, so a reader's last access to a node it released happens before
// the change).
//
// Deletion is lazy: an emptied node is removed and a node that falls below a
// quarter full is merged into a neighbour when both fit in one node; nodes
// are never rebalanced by moving entries between neighbours.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace raftkv {

template <typename K, typename V>
class CowBTree {
  struct Node;  // below; named here for Iterator

 public:
  static constexpr size_t kMaxEntries = 64;  // keys per leaf, children per inner node
  static constexpr size_t kMinEntries = kMaxEntries / 4;

  CowBTree() = default;
  CowBTree(const CowBTree& other) : root_(other.root_), size_(other.size_) {}
  CowBTree& operator=(const CowBTree& other) {
    CowBTree copy(other);
    swap(copy);
    return *this;
  }
  CowBTree(CowBTree&& other) noexcept : root_(std::move(other.root_)), size_(other.size_) {
    other.size_ = 0;
  }
  CowBTree& operator=(CowBTree&& other) noexcept {
    CowBTree moved(std::move(other));
    swap(moved);
    return *this;
  }
  void swap(CowBTree& other) noexcept {
    root_.swap(other.root_);
    std::swap(size_, other.size_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { CowBTree().swap(*this); }

  // The value of `key`, or nullptr. Valid until the next change to this tree.
  const V* find(const K& key) const {
    const Node* n = root_.get();
    if (n == nullptr) return nullptr;
    while (!n->leaf) n = n->children[ChildFor(n, key)].get();
    auto it = std::lower_bound(n->keys.begin(), n->keys.end(), key);
    if (it == n->keys.end() || key < *it) return nullptr;
    return &n->values[static_cast<size_t>(it - n->keys.begin())];
  }

  // Sets `key` to `value`; true if the key was not present.
  bool insert_or_assign(K key, V value) {
    if (root_.get() == nullptr) root_ = NodePtr(new Node(/*leaf=*/true));
    Split split;
    const bool inserted = Insert(&root_, std::move(key), std::move(value), &split);
    if (split.right.get() != nullptr) {
      NodePtr new_root(new Node(/*leaf=*/false));
      new_root->keys.push_back(std::move(split.key));
      new_root->children.push_back(std::move(root_));
      new_root->children.push_back(std::move(split.right));
      root_ = std::move(new_root);
    }
    if (inserted) ++size_;
    return inserted;
  }

  // Removes `key`; true if it was present.
  bool erase(const K& key) {
    if (root_.get() == nullptr) return false;
    if (!Erase(&root_, key)) return false;
    --size_;
    // An inner root with one child gives way to it; an empty root goes.
    while (!root_->leaf && root_->children.size() == 1) {
      NodePtr child = root_->children[0];
      root_ = std::move(child);
    }
    if (root_->leaf && root_->keys.empty()) root_ = NodePtr();
    return true;
  }

  // Forward iteration in key order.
  class Iterator {
   public:
    bool Valid() const { return !path_.empty(); }
    const K& key() const { return Leaf()->keys[path_.back().second]; }
    const V& value() const { return Leaf()->values[path_.back().second]; }
    void Next() {
      ++path_.back().second;
      Settle();
    }

   private:
    friend class CowBTree;
    const Node* Leaf() const { return path_.back().first; }
    // Moves past exhausted nodes to the next entry (or the end).
    void Settle() {
      while (!path_.empty()) {
        auto& [node, i] = path_.back();
        const size_t n = node->leaf ? node->keys.size() : node->children.size();
        if (i < n) {
          if (node->leaf) return;
          const Node* child = node->children[i].get();
          path_.emplace_back(child, 0);
          continue;
        }
        path_.pop_back();
        if (!path_.empty()) ++path_.back().second;
      }
    }
    // The tree iterated holds its nodes: the iterator must not outlive it
    // or a change to it.
    std::vector<std::pair<const Node*, size_t>> path_;
  };

  Iterator begin() const {
    Iterator it;
    if (root_.get() != nullptr) {
      it.path_.emplace_back(root_.get(), 0);
      it.Settle();
    }
    return it;
  }
  // The first entry whose key is >= `key`.
  Iterator lower_bound(const K& key) const {
    Iterator it;
    const Node* n = root_.get();
    if (n == nullptr) return it;
    while (!n->leaf) {
      const size_t i = ChildFor(n, key);
      it.path_.emplace_back(n, i);
      n = n->children[i].get();
    }
    const size_t i =
        static_cast<size_t>(std::lower_bound(n->keys.begin(), n->keys.end(), key) - n->keys.begin());
    it.path_.emplace_back(n, i);
    it.Settle();
    return it;
  }

  // For tests: checks the structure (key order, separators, sizes); empty
  // if sound, else what is wrong.
  std::string CheckInvariants() const {
    if (root_.get() == nullptr) return size_ == 0 ? "" : "empty root with size " + std::to_string(size_);
    size_t count = 0;
    const K* prev = nullptr;
    std::string why = Check(root_.get(), nullptr, nullptr, &count, &prev);
    if (why.empty() && count != size_) {
      why = "counted " + std::to_string(count) + " entries, size says " + std::to_string(size_);
    }
    return why;
  }
  // For tests: the height of the tree (0 when empty).
  size_t height() const {
    size_t h = 0;
    for (const Node* n = root_.get(); n != nullptr; n = n->leaf ? nullptr : n->children[0].get()) ++h;
    return h;
  }

 private:
  // An intrusive reference-counted pointer (acquire/release counts, so that
  // "I hold the only reference" means no one else can still be reading).
  class NodePtr {
   public:
    NodePtr() = default;
    explicit NodePtr(Node* n) : n_(n) {}  // takes the initial reference
    NodePtr(const NodePtr& o) : n_(o.n_) {
      if (n_ != nullptr) n_->refs.fetch_add(1, std::memory_order_relaxed);
    }
    NodePtr(NodePtr&& o) noexcept : n_(o.n_) { o.n_ = nullptr; }
    NodePtr& operator=(NodePtr o) noexcept {
      swap(o);
      return *this;
    }
    ~NodePtr() {
      if (n_ != nullptr && n_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete n_;
    }
    void swap(NodePtr& o) noexcept { std::swap(n_, o.n_); }
    Node* get() const { return n_; }
    Node* operator->() const { return n_; }
    bool unique() const { return n_->refs.load(std::memory_order_acquire) == 1; }

   private:
    Node* n_ = nullptr;
  };

  struct Node {
    explicit Node(bool is_leaf) : leaf(is_leaf) {}
    Node(const Node& o) : leaf(o.leaf), keys(o.keys), values(o.values), children(o.children) {}
    std::atomic<uint32_t> refs{1};
    const bool leaf;
    // Leaf: keys[i] -> values[i], sorted. Inner: children.size() ==
    // keys.size() + 1; keys[i] <= every key under children[i + 1] and >
    // every key under children[i].
    std::vector<K> keys;
    std::vector<V> values;
    std::vector<NodePtr> children;
  };

  struct Split {
    K key{};
    NodePtr right;
  };

  static size_t ChildFor(const Node* n, const K& key) {
    return static_cast<size_t>(std::upper_bound(n->keys.begin(), n->keys.end(), key) -
                               n->keys.begin());
  }
  // Makes *slot exclusively this tree's (cloning it if shared). The slot's
  // holder must already be exclusive.
  static Node* Mutable(NodePtr* slot) {
    if (!slot->unique()) *slot = NodePtr(new Node(*slot->get()));
    return slot->get();
  }

  static bool Insert(NodePtr* slot, K&& key, V&& value, Split* split) {
    Node* n = Mutable(slot);
    if (n->leaf) {
      auto it = std::lower_bound(n->keys.begin(), n->keys.end(), key);
      const size_t i = static_cast<size_t>(it - n->keys.begin());
      if (it != n->keys.end() && !(key < *it)) {
        n->values[i] = std::move(value);
        return false;
      }
      n->keys.insert(it, std::move(key));
      n->values.insert(n->values.begin() + static_cast<std::ptrdiff_t>(i), std::move(value));
      if (n->keys.size() > kMaxEntries) SplitLeaf(n, split);
      return true;
    }
    const size_t i = ChildFor(n, key);
    Split child_split;
    const bool inserted = Insert(&n->children[i], std::move(key), std::move(value), &child_split);
    if (child_split.right.get() != nullptr) {
      n->keys.insert(n->keys.begin() + static_cast<std::ptrdiff_t>(i), std::move(child_split.key));
      n->children.insert(n->children.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                         std::move(child_split.right));
      if (n->children.size() > kMaxEntries) SplitInner(n, split);
    }
    return inserted;
  }

  static void SplitLeaf(Node* n, Split* split) {
    const auto half = static_cast<std::ptrdiff_t>(n->keys.size() / 2);
    NodePtr right(new Node(/*leaf=*/true));
    right->keys.assign(std::make_move_iterator(n->keys.begin() + half),
                       std::make_move_iterator(n->keys.end()));
    right->values.assign(std::make_move_iterator(n->values.begin() + half),
                         std::make_move_iterator(n->values.end()));
    n->keys.erase(n->keys.begin() + half, n->keys.end());
    n->values.erase(n->values.begin() + half, n->values.end());
    split->key = right->keys.front();
    split->right = std::move(right);
  }

  static void SplitInner(Node* n, Split* split) {
    // children [0, half) stay; keys[half - 1] moves up; the rest go right.
    const auto half = static_cast<std::ptrdiff_t>(n->children.size() / 2);
    NodePtr right(new Node(/*leaf=*/false));
    right->keys.assign(std::make_move_iterator(n->keys.begin() + half),
                       std::make_move_iterator(n->keys.end()));
    right->children.assign(std::make_move_iterator(n->children.begin() + half),
                           std::make_move_iterator(n->children.end()));
    split->key = std::move(n->keys[static_cast<size_t>(half - 1)]);
    n->keys.erase(n->keys.begin() + half - 1, n->keys.end());
    n->children.erase(n->children.begin() + half, n->children.end());
    split->right = std::move(right);
  }

  static size_t Entries(const Node* n) { return n->leaf ? n->keys.size() : n->children.size(); }

  static bool Erase(NodePtr* slot, const K& key) {
    // Find first without cloning: erasing an absent key changes nothing.
    if (slot->get()->leaf) {
      const Node* c = slot->get();
      auto it = std::lower_bound(c->keys.begin(), c->keys.end(), key);
      if (it == c->keys.end() || key < *it) return false;
      const auto i = it - c->keys.begin();
      Node* n = Mutable(slot);
      n->keys.erase(n->keys.begin() + i);
      n->values.erase(n->values.begin() + i);
      return true;
    }
    if (!Contains(slot->get(), key)) return false;
    Node* n = Mutable(slot);
    const size_t i = ChildFor(n, key);
    Erase(&n->children[i], key);
    const size_t left = Entries(n->children[i].get());
    if (left == 0) {
      RemoveChild(n, i);
    } else if (left < kMinEntries && n->children.size() > 1) {
      // Merge with the right neighbour (or the left one for the last child).
      const size_t a = i + 1 < n->children.size() ? i : i - 1;
      if (Entries(n->children[a].get()) + Entries(n->children[a + 1].get()) <= kMaxEntries) {
        Merge(n, a);
      }
    }
    return true;
  }

  static bool Contains(const Node* n, const K& key) {
    while (!n->leaf) n = n->children[ChildFor(n, key)].get();
    auto it = std::lower_bound(n->keys.begin(), n->keys.end(), key);
    return it != n->keys.end() && !(key < *it);
  }

  static void RemoveChild(Node* n, size_t i) {
    n->children.erase(n->children.begin() + static_cast<std::ptrdiff_t>(i));
    if (!n->keys.empty()) {
      n->keys.erase(n->keys.begin() + static_cast<std::ptrdiff_t>(i == 0 ? 0 : i - 1));
    }
  }

  // Merges children[a + 1] into children[a] (both fit in one node).
  static void Merge(Node* n, size_t a) {
    Node* left = Mutable(&n->children[a]);
    Node* right = n->children[a + 1].get();  // read (copied or moved) only
    const bool take = n->children[a + 1].unique();
    if (left->leaf) {
      if (take) {
        std::move(right->keys.begin(), right->keys.end(), std::back_inserter(left->keys));
        std::move(right->values.begin(), right->values.end(), std::back_inserter(left->values));
      } else {
        left->keys.insert(left->keys.end(), right->keys.begin(), right->keys.end());
        left->values.insert(left->values.end(), right->values.begin(), right->values.end());
      }
    } else {
      left->keys.push_back(std::move(n->keys[a]));
      if (take) {
        std::move(right->keys.begin(), right->keys.end(), std::back_inserter(left->keys));
        std::move(right->children.begin(), right->children.end(),
                  std::back_inserter(left->children));
      } else {
        left->keys.insert(left->keys.end(), right->keys.begin(), right->keys.end());
        left->children.insert(left->children.end(), right->children.begin(),
                              right->children.end());
      }
    }
    n->keys.erase(n->keys.begin() + static_cast<std::ptrdiff_t>(a));
    n->children.erase(n->children.begin() + static_cast<std::ptrdiff_t>(a) + 1);
  }

  // Checks the subtree under `n`: every key in [lo, hi) (null: unbounded),
  // in order after *prev; counts the entries.
  static std::string Check(const Node* n, const K* lo, const K* hi, size_t* count,
                           const K** prev) {
    if (n->leaf) {
      if (n->keys.size() != n->values.size()) return "leaf with keys and values of different counts";
      if (n->keys.size() > kMaxEntries) return "leaf over capacity";
      for (const K& k : n->keys) {
        if (*prev != nullptr && !(**prev < k)) return "keys out of order";
        if (lo != nullptr && k < *lo) return "key below its separator";
        if (hi != nullptr && !(k < *hi)) return "key at or above the next separator";
        *prev = &k;
      }
      *count += n->keys.size();
      return n->keys.empty() ? "empty leaf" : "";
    }
    if (n->children.size() != n->keys.size() + 1) return "inner node with a wrong key count";
    if (n->children.size() > kMaxEntries) return "inner node over capacity";
    for (size_t i = 0; i < n->children.size(); ++i) {
      const K* clo = i == 0 ? lo : &n->keys[i - 1];
      const K* chi = i == n->keys.size() ? hi : &n->keys[i];
      std::string why = Check(n->children[i].get(), clo, chi, count, prev);
      if (!why.empty()) return why;
    }
    return "";
  }

  NodePtr root_;
  size_t size_ = 0;
};

}  // namespace raftkv
