// File: ref/flashinfer/cost_heap.h
//
// FlashInfer's MinHeap (include/flashinfer/attention/heap.h): (cluster, float cost) pairs,
// least cost on top, compared on cost alone. Which of several equal-cost clusters comes out
// first is decided by the standard library's heap algorithm, so MLAPlan's work lists depend on
// it. FlashInfer is built with libstdc++ (g++ and nvcc on Linux); this class performs libstdc++'s
// std::push_heap / std::pop_heap steps (bits/stl_heap.h: __push_heap, __adjust_heap, GCC 12)
// explicitly, so the model gives FlashInfer's tie order whatever library it is compiled with.
#pragma once

#include <cstdint>
#include <vector>

namespace mlasim::ref::flashinfer {

struct HeapEntry {
  int32_t index = 0;  // cluster
  float cost = 0;     // accumulated cost_function values
  bool operator==(const HeapEntry& o) const { return index == o.index && cost == o.cost; }
};

class CostHeap {
 public:
  // `capacity` entries (i, 0.f) for i in [0, capacity): a valid heap as it stands.
  explicit CostHeap(int32_t capacity);
  void Insert(const HeapEntry& e);  // std::push_heap after push_back
  HeapEntry Pop();                  // std::pop_heap, then back() and pop_back(); size() >= 1
  const std::vector<HeapEntry>& entries() const { return heap_; }
  int32_t size() const { return static_cast<int32_t>(heap_.size()); }

 private:
  // MinHeap's comparator: a "less than" b for the max-heap algorithm when a costs more.
  static bool Comp(const HeapEntry& a, const HeapEntry& b) { return a.cost > b.cost; }
  void SiftUp(int64_t hole, int64_t top, HeapEntry value);      // __push_heap
  void AdjustDown(int64_t hole, int64_t len, HeapEntry value);  // __adjust_heap
  std::vector<HeapEntry> heap_;
};

}  // namespace mlasim::ref::flashinfer
