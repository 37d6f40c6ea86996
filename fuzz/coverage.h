// File: fuzz/coverage.h
//
// A campaign worker's coverage counts (the summary's "coverage:" line, docs/fuzzing.md): what
// fuzz/campaign.cpp counts a case's features with, apart so that its key cache is tested on keys
// of its choosing (tests/fuzz/coverage_test.cpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mlasim::fuzz {

// A worker's coverage counts by feature key, merged into the ordered summary at the end (hashed:
// a case counts about 25 keys, and a search tree compared each key's text several times).
using CoverageCounts = std::unordered_map<std::string, int64_t>;

// A worker's coverage: the counts by key, a key's counter found through a small cache of the
// keys it counted last (a case counts about 25 keys, most of them those of the case before:
// hashing each key's text into the map was about 1 % of a fuzz case), and the swarm's omitted
// options counted by position (the keys of every case: SwarmOptionKeys).
class WorkerCoverage {
 public:
  // Counts the key `prefix` + `suffix` (a name, or a number's decimal digits) once.
  void Hit(std::string_view prefix, std::string_view suffix = {}) { ++Counter(prefix, suffix); }
  void Hit(std::string_view prefix, int64_t n) {
    const fmt::format_int digits(n);
    Hit(prefix, std::string_view(digits.data(), digits.size()));
  }
  // Counts option i of swarm knob k left out (`keys`: the campaign's SwarmOptionKeys).
  void HitSwarm(size_t k, size_t i) {
    if (swarm_.size() <= k) swarm_.resize(k + 1);
    if (swarm_[k].size() <= i) swarm_[k].resize(i + 1);
    ++swarm_[k][i];
  }
  // Adds every count to `out` (keys[k][i] names swarm count (k, i)); counts of 0 add no key.
  void MergeInto(const std::vector<std::vector<std::string>>& keys,
                 std::map<std::string, int64_t>& out) const {
    for (const auto& [key, n] : counts_) out[key] += n;
    for (size_t k = 0; k < swarm_.size(); ++k)
      for (size_t i = 0; i < swarm_[k].size(); ++i)
        if (swarm_[k][i] > 0) out[keys[k][i]] += swarm_[k][i];
  }

 private:
  // A cached key: its text, split where the caller split it, and its counter in counts_ (an
  // unordered_map's values stay where they are when it rehashes).
  struct Slot {
    std::string prefix, suffix;
    int64_t* counter = nullptr;
  };
  int64_t& Counter(std::string_view prefix, std::string_view suffix) {
    // The slot: a hash of where the prefix is (a call site's literal: one address) and of the
    // suffix's text. A slot holds a key only when both parts' texts are equal, so a prefix met
    // at another address (the same text elsewhere) only takes another slot, to the same counter.
    uint64_t h = (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(prefix.data())) ^
                  (uint64_t{prefix.size()} << 56)) *
                 0x9E3779B97F4A7C15ull;
    for (size_t at = 0; at < suffix.size(); at += 8) {
      uint64_t word = 0;
      std::memcpy(&word, suffix.data() + at, std::min<size_t>(8, suffix.size() - at));
      h = (h ^ word) * 0xD6E8FEB86659FD93ull;
    }
    Slot& slot = cache_[(h ^ (h >> 32)) % cache_.size()];
    if (slot.counter != nullptr && slot.prefix == prefix && slot.suffix == suffix)
      return *slot.counter;
    key_.assign(prefix).append(suffix);
    slot.counter = &counts_.try_emplace(key_, 0).first->second;
    slot.prefix.assign(prefix);
    slot.suffix.assign(suffix);
    return *slot.counter;
  }

  CoverageCounts counts_;
  std::array<Slot, 64> cache_;
  std::string key_;  // (the key spelled for a lookup, its memory kept)
  std::vector<std::vector<int64_t>> swarm_;
};

}  // namespace mlasim::fuzz
