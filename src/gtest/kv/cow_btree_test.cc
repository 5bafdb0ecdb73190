#include "storage/cow_btree.h"

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace raftkv {
namespace {

using Tree = CowBTree<std::string, std::string>;
using Model = std::map<std::string, std::string>;

std::string Key(uint32_t n) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "k%08u", n);
  return buf;
}

// The tree holds exactly the model's entries, in order, and is sound.
void ExpectSame(const Tree& tree, const Model& model) {
  ASSERT_EQ(tree.CheckInvariants(), "");
  ASSERT_EQ(tree.size(), model.size());
  auto m = model.begin();
  for (Tree::Iterator it = tree.begin(); it.Valid(); it.Next(), ++m) {
    ASSERT_NE(m, model.end());
    ASSERT_EQ(it.key(), m->first);
    ASSERT_EQ(it.value(), m->second);
  }
  ASSERT_EQ(m, model.end());
}

TEST(CowBTreeTest, EmptyTree) {
  Tree t;
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.find("a"), nullptr);
  EXPECT_FALSE(t.erase("a"));
  EXPECT_FALSE(t.begin().Valid());
  EXPECT_FALSE(t.lower_bound("a").Valid());
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(t.height(), 0u);
}

TEST(CowBTreeTest, InsertAssignFindErase) {
  Tree t;
  EXPECT_TRUE(t.insert_or_assign("b", "1"));
  EXPECT_FALSE(t.insert_or_assign("b", "2"));
  EXPECT_TRUE(t.insert_or_assign("a", "3"));
  ASSERT_NE(t.find("b"), nullptr);
  EXPECT_EQ(*t.find("b"), "2");
  EXPECT_EQ(*t.find("a"), "3");
  EXPECT_EQ(t.find("c"), nullptr);
  EXPECT_TRUE(t.erase("b"));
  EXPECT_FALSE(t.erase("b"));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(t.erase("a"));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.height(), 0u);
}

TEST(CowBTreeTest, SequentialInsertsBuildADeepSoundTree) {
  Tree t;
  Model m;
  for (uint32_t i = 0; i < 100000; ++i) {
    t.insert_or_assign(Key(i), std::to_string(i));
    m[Key(i)] = std::to_string(i);
  }
  ExpectSame(t, m);
  EXPECT_GE(t.height(), 3u);
  // Erase every other key, then all: merges and removals keep it sound.
  for (uint32_t i = 0; i < 100000; i += 2) {
    ASSERT_TRUE(t.erase(Key(i)));
    m.erase(Key(i));
  }
  ExpectSame(t, m);
  for (uint32_t i = 1; i < 100000; i += 2) ASSERT_TRUE(t.erase(Key(i)));
  m.clear();
  ExpectSame(t, m);
  EXPECT_EQ(t.height(), 0u);
}

TEST(CowBTreeTest, LowerBound) {
  Tree t;
  for (uint32_t i = 0; i < 5000; i += 10) t.insert_or_assign(Key(i), "v");
  auto it = t.lower_bound(Key(15));
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.key(), Key(20));
  it = t.lower_bound(Key(20));
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.key(), Key(20));
  it.Next();
  EXPECT_EQ(it.key(), Key(30));
  EXPECT_FALSE(t.lower_bound(Key(4991)).Valid());
  it = t.lower_bound("");
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.key(), Key(0));
  // Walking from every lower bound visits the rest in order.
  size_t n = 0;
  for (auto w = t.lower_bound(Key(2500)); w.Valid(); w.Next()) ++n;
  EXPECT_EQ(n, 250u);
}

// Random operations against std::map, with copies taken along the way: every
// copy must keep the exact contents it had when it was taken, whatever the
// original (or another copy) does afterwards.
TEST(CowBTreeTest, CopiesAreImmutableImagesUnderRandomChanges) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    Tree t;
    Model m;
    std::vector<std::pair<Tree, Model>> images;
    for (int op = 0; op < 40000; ++op) {
      const uint32_t k = rng() % 3000;
      const uint32_t r = rng() % 100;
      if (r < 55) {
        const std::string v = std::to_string(rng());
        EXPECT_EQ(t.insert_or_assign(Key(k), v), m.count(Key(k)) == 0);
        m[Key(k)] = v;
      } else if (r < 95) {
        EXPECT_EQ(t.erase(Key(k)), m.erase(Key(k)) > 0);
      } else if (r < 99) {
        const std::string* found = t.find(Key(k));
        auto mi = m.find(Key(k));
        ASSERT_EQ(found != nullptr, mi != m.end());
        if (found != nullptr) {
          EXPECT_EQ(*found, mi->second);
        }
      } else {
        images.emplace_back(t, m);
        if (images.size() > 8) images.erase(images.begin());
      }
      if (op % 5000 == 0) ExpectSame(t, m);
    }
    ExpectSame(t, m);
    for (const auto& [image, model] : images) ExpectSame(image, model);
    // A change to an image leaves the tree it was taken from alone.
    if (!images.empty()) {
      Tree& image = images.back().first;
      for (uint32_t k = 0; k < 3000; k += 3) image.erase(Key(k));
      image.insert_or_assign("new", "x");
      ExpectSame(t, m);
    }
  }
}

// One thread changes the tree while others iterate images taken from it
// (run under TSan: shared nodes are never written).
TEST(CowBTreeTest, ImagesReadOnOtherThreadsWhileTheWriterGoesOn) {
  Tree t;
  for (uint32_t i = 0; i < 20000; ++i) t.insert_or_assign(Key(i), "v0");
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  std::atomic<int> failures{0};
  std::vector<Tree> images;
  for (int r = 0; r < 3; ++r) images.push_back(t);
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, image = std::move(images[static_cast<size_t>(r)])]() mutable {
      while (!done.load()) {
        size_t n = 0;
        for (auto it = image.begin(); it.Valid(); it.Next()) {
          if (it.value() != "v0") failures.fetch_add(1);
          ++n;
        }
        if (n != 20000) failures.fetch_add(1);
      }
      image.clear();  // frees (or releases) the image on this thread
    });
  }
  std::mt19937 rng(7);
  for (int op = 0; op < 100000; ++op) {
    const uint32_t k = rng() % 30000;
    if (rng() % 3 == 0) {
      t.erase(Key(k));
    } else {
      t.insert_or_assign(Key(k), "v1");
    }
  }
  done = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(t.CheckInvariants(), "");
}

}  // namespace
}  // namespace raftkv
