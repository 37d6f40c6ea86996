#include "sim/memory.h"

#include <algorithm>
#include <cstdio>

namespace mlasim::sim {
namespace {

// Device virtual addresses start here (a typical GPU VA range); transient buffers live 1 TiB up.
constexpr uint64_t kPersistentBase = 0x7f0000000000ull;
constexpr uint64_t kTransientBase = 0x7f1000000000ull;
constexpr int64_t kCachingRound = 512;

uint64_t RoundUp(uint64_t x, uint64_t m) {
  return (x + m - 1) / m * m;
}

std::string Hex(uint64_t x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

void IntervalSet::AddMerged(int64_t begin, int64_t end) {
  auto it = std::lower_bound(spans_.begin(), spans_.end(), std::make_pair(begin, begin));
  if (it != spans_.begin() && std::prev(it)->second >= begin) --it;
  int64_t b = begin, e = end;
  auto first = it;
  while (it != spans_.end() && it->first <= e) {
    b = std::min(b, it->first);
    e = std::max(e, it->second);
    ++it;
  }
  it = spans_.erase(first, it);
  spans_.insert(it, {b, e});
}

std::pair<int64_t, int64_t> IntervalSet::FirstGap(int64_t begin, int64_t end) const {
  int64_t cursor = begin;
  auto it = std::upper_bound(spans_.begin(), spans_.end(), std::make_pair(begin, INT64_MAX));
  if (it != spans_.begin()) --it;
  for (; it != spans_.end() && cursor < end; ++it) {
    if (it->second <= cursor) continue;
    if (it->first > cursor) return {cursor, std::min(it->first, end)};
    cursor = it->second;
  }
  if (cursor < end) return {cursor, end};
  return {end, end};
}

AddressSpace::AddressSpace(const AllocatorSpec& spec)
    : spec_(spec),
      persistent_cursor_(kPersistentBase),
      transient_base_(kTransientBase),
      transient_cursor_(kTransientBase) {}

void AddressSpace::Reset(const AllocatorSpec& spec) {
  for (Allocation& a : allocs_) spare_.push_back(std::move(a));
  allocs_.clear();
  spec_ = spec;
  persistent_cursor_ = kPersistentBase;
  transient_base_ = transient_cursor_ = kTransientBase;
  for (int arena = 0; arena < 2; ++arena)
    seg_begin_[arena] = seg_end_[arena] = seg_used_[arena] = 0;
}

int32_t AddressSpace::Place(const std::string& name, const TensorShape& shape, bool transient) {
  // A spare allocation is taken whole, for its memory only (the strings' and the written set's
  // buffers): every field is set below, the written set cleared. (`name` is never one of this
  // space's own names, which allocs_ may move: the callers name tensors of a trace.)
  if (spare_.empty()) {
    allocs_.emplace_back();
  } else {
    allocs_.push_back(std::move(spare_.back()));
    spare_.pop_back();
    allocs_.back().written.Clear();
  }
  Allocation& a = allocs_.back();
  a.name = name;
  a.bytes = std::max<int64_t>(shape.rows * shape.row_bytes, 0);
  a.row_bytes = shape.row_bytes;
  a.heads = shape.heads;
  a.cols = shape.cols;
  a.elem_bytes = shape.elem_bytes;
  a.dtype = shape.dtype;
  a.transient = transient;
  uint64_t& cursor = transient ? transient_cursor_ : persistent_cursor_;
  const uint64_t page = static_cast<uint64_t>(spec_.page_bytes);
  if (spec_.model == AllocatorModel::kExact) {
    const uint64_t mapped = RoundUp(std::max<uint64_t>(a.bytes, 1), page);
    a.mapped_begin = cursor;
    a.mapped_end = cursor + mapped;
    a.base = a.mapped_end - static_cast<uint64_t>(a.bytes);
    cursor = a.mapped_end + page;  // the guard page stays unmapped
  } else {
    const int arena = transient ? 1 : 0;
    const uint64_t seg = static_cast<uint64_t>(spec_.segment_bytes);
    const uint64_t size = RoundUp(std::max<uint64_t>(a.bytes, 1), kCachingRound);
    if (seg_end_[arena] == 0 || seg_used_[arena] + size > seg_end_[arena]) {
      // Open a new segment after an unmapped gap of one segment.
      const uint64_t begin = seg_end_[arena] == 0 ? cursor : seg_end_[arena] + seg;
      seg_begin_[arena] = begin;
      seg_end_[arena] = begin + RoundUp(size, seg);
      seg_used_[arena] = begin;
    }
    a.base = seg_used_[arena];
    a.mapped_begin = seg_begin_[arena];
    a.mapped_end = seg_end_[arena];
    seg_used_[arena] += size;
    cursor = seg_end_[arena];
  }
  return static_cast<int32_t>(allocs_.size() - 1);
}

int32_t AddressSpace::Allocate(const std::string& name, const TensorShape& shape) {
  return Place(name, shape, false);
}

void AddressSpace::BeginCall() {
  // The persistent allocations keep their order; the transient ones go to spare_.
  size_t kept = 0;
  for (size_t i = 0; i < allocs_.size(); ++i) {
    if (allocs_[i].transient)
      spare_.push_back(std::move(allocs_[i]));
    else if (kept++ != i)
      allocs_[kept - 1] = std::move(allocs_[i]);
  }
  allocs_.resize(kept);
  transient_cursor_ = transient_base_;
  seg_begin_[1] = seg_end_[1] = seg_used_[1] = 0;
}

int32_t AddressSpace::AllocateTransient(const std::string& name, const TensorShape& shape) {
  return Place(name, shape, true);
}

const Allocation* AddressSpace::Find(const std::string& name) const {
  for (const Allocation& a : allocs_)
    if (a.name == name) return &a;
  return nullptr;
}

Allocation* AddressSpace::FindMutable(const std::string& name) {
  for (Allocation& a : allocs_)
    if (a.name == name) return &a;
  return nullptr;
}

uint64_t AddressSpace::FirstUnmapped(uint64_t begin, uint64_t end) const {
  uint64_t cursor = begin;
  bool progressed = true;
  while (cursor < end && progressed) {
    progressed = false;
    for (const Allocation& a : allocs_) {
      if (a.mapped_begin <= cursor && cursor < a.mapped_end) {
        cursor = a.mapped_end;
        progressed = true;
      }
    }
  }
  return std::min(cursor, end);
}

std::vector<const Allocation*> AddressSpace::Overlapping(uint64_t begin, uint64_t end,
                                                         const Allocation* self) const {
  std::vector<const Allocation*> out;
  for (const Allocation& a : allocs_) {
    if (&a == self || a.bytes == 0) continue;
    if (a.base < end && begin < a.base + static_cast<uint64_t>(a.bytes)) out.push_back(&a);
  }
  std::sort(out.begin(), out.end(),
            [](const Allocation* x, const Allocation* y) { return x->base < y->base; });
  return out;
}

const Allocation* AddressSpace::Nearest(uint64_t address) const {
  const Allocation* best = nullptr;
  for (const Allocation& a : allocs_) {
    if (a.base <= address && address < a.base + static_cast<uint64_t>(a.bytes)) return &a;
    const uint64_t end = a.base + static_cast<uint64_t>(a.bytes);
    if (end <= address && (!best || end > best->base + static_cast<uint64_t>(best->bytes)))
      best = &a;
  }
  return best;
}

nlohmann::json AddressSpace::LayoutJson() const {
  nlohmann::json allocs = nlohmann::json::array();
  std::vector<const Allocation*> sorted;
  for (const Allocation& a : allocs_) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(),
            [](const Allocation* x, const Allocation* y) { return x->base < y->base; });
  for (const Allocation* a : sorted) {
    nlohmann::json j = {{"name", a->name},
                        {"base", Hex(a->base)},
                        {"bytes", a->bytes},
                        {"row_bytes", a->row_bytes},
                        {"dtype", a->dtype},
                        {"mapped_begin", Hex(a->mapped_begin)},
                        {"mapped_end", Hex(a->mapped_end)}};
    // A row's heads and columns, where the rows are heads x cols elements: not for a view
    // allocated as flat bytes (executor.cpp AllocateTensors: row_bytes 1), whose row is a byte.
    if (a->heads > 0 && int64_t{a->heads} * a->cols * a->elem_bytes == a->row_bytes) {
      j["heads"] = a->heads;
      j["cols"] = a->cols;
      j["elem_bytes"] = a->elem_bytes;
    }
    allocs.push_back(j);
  }
  return nlohmann::json{{"allocator", spec_.model == AllocatorModel::kExact ? "exact" : "caching"},
                        {"page_bytes", spec_.page_bytes},
                        {"segment_bytes", spec_.segment_bytes},
                        {"allocations", allocs}};
}

}  // namespace mlasim::sim
