#include "ref/flashinfer/cost_heap.h"

#include "ref/status.h"

namespace mlasim::ref::flashinfer {

CostHeap::CostHeap(int32_t capacity) {
  MLASIM_ASSERT(capacity >= 0, "negative heap capacity");
  heap_.reserve(static_cast<size_t>(capacity) + 1);
  for (int32_t i = 0; i < capacity; ++i) heap_.push_back({i, 0.f});
}

void CostHeap::SiftUp(int64_t hole, int64_t top, HeapEntry value) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && Comp(heap_[parent], value)) {
    heap_[hole] = heap_[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  heap_[hole] = value;
}

void CostHeap::AdjustDown(int64_t hole, int64_t len, HeapEntry value) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (Comp(heap_[child], heap_[child - 1])) --child;
    heap_[hole] = heap_[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    heap_[hole] = heap_[child - 1];
    hole = child - 1;
  }
  SiftUp(hole, top, value);
}

void CostHeap::Insert(const HeapEntry& e) {
  heap_.push_back(e);
  SiftUp(static_cast<int64_t>(heap_.size()) - 1, 0, e);
}

HeapEntry CostHeap::Pop() {
  MLASIM_ASSERT(!heap_.empty(), "pop from an empty cost heap");
  const int64_t n = static_cast<int64_t>(heap_.size());
  if (n > 1) {
    const HeapEntry value = heap_[n - 1];
    heap_[n - 1] = heap_[0];
    AdjustDown(0, n - 1, value);
  }
  const HeapEntry top = heap_.back();
  heap_.pop_back();
  return top;
}

}  // namespace mlasim::ref::flashinfer
