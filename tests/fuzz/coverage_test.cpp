// fuzz/coverage.h: a worker's coverage counts are those of a plain map of the keys' texts,
// whatever the key cache holds: keys that share a cache slot, one text met at two addresses or
// split in two places, suffixes of every length past a word, and swarm counts by position.
#include "fuzz/coverage.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mlasim::fuzz {
namespace {

// 160 prefixes and the empty one (far more than the cache's 64 slots, so slots are shared and
// taken over), each spelled twice at two addresses, and suffixes of 0 to 19 characters (0, 1 or 2 eight-byte words
// and a partial one). A deterministic walk of 40,000 hits over them, numbers among them, is
// counted by WorkerCoverage and by a std::map of prefix + suffix; the counts must be equal.
// Fails when a slot that takes over another key keeps the old key's prefix or suffix text (its
// counter then counts the old key's hits; a slot never given a prefix matches the empty one),
// and when a hit compares only one part.
TEST(WorkerCoverage, CountsAreAPlainMapsOfTheKeysTexts) {
  std::vector<std::string> prefixes, copies;
  for (int i = 0; i < 160; ++i)
    prefixes.push_back("feature" + std::to_string(i % 40) + ":" +
                       std::string(static_cast<size_t>(i / 40), 'x'));
  prefixes.emplace_back();  // a key that is all suffix
  copies = prefixes;        // the same texts at other addresses
  std::vector<std::string> suffixes;
  for (int n = 0; n < 20; ++n) suffixes.push_back(std::string(static_cast<size_t>(n), 'a' + n % 7));
  WorkerCoverage cov;
  std::map<std::string, int64_t> want;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int hit = 0; hit < 40000; ++hit) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = x >> 16;
    const std::string& prefix = (r & 1) ? copies[(r >> 1) % 161] : prefixes[(r >> 1) % 161];
    // Most hits repeat a few keys (as a campaign's cases do), the rest walk every key.
    const bool few = (r >> 9) % 4 != 0;
    if ((r >> 12) % 5 == 0) {
      const int64_t n =
          few ? static_cast<int64_t>((r >> 16) % 3) : static_cast<int64_t>(r >> 16) % 2001 - 1000;
      cov.Hit(prefix, n);
      want[prefix + std::to_string(n)] += 1;
    } else {
      const std::string& suffix = suffixes[few ? (r >> 16) % 3 : (r >> 16) % 20];
      cov.Hit(prefix, suffix);
      want[prefix + suffix] += 1;
    }
  }
  // One text split in two places is one key.
  cov.Hit("feature1:", "ab");
  cov.Hit("feature1:a", "b");
  cov.Hit(std::string_view("feature1:ab"));
  want["feature1:ab"] += 3;
  std::map<std::string, int64_t> got;
  cov.MergeInto({}, got);
  EXPECT_EQ(got, want);
}

// Swarm counts go to their keys by position, add to counts of the same text and to what `out`
// holds, and an option never counted adds no key (not even one below a counted option).
TEST(WorkerCoverage, SwarmCountsByPosition) {
  const std::vector<std::vector<std::string>> keys = {
      {"swarm-out:a.0", "swarm-out:a.1"}, {"swarm-out:b.0", "swarm-out:b.1", "swarm-out:b.2"}};
  WorkerCoverage cov;
  cov.HitSwarm(1, 2);
  cov.HitSwarm(1, 2);
  cov.HitSwarm(0, 1);
  cov.Hit("swarm-out:", "a.1");  // the same text as swarm key (0, 1)
  cov.Hit("swarm-out:nothing");
  std::map<std::string, int64_t> out = {{"swarm-out:b.2", 5}};
  cov.MergeInto(keys, out);
  const std::map<std::string, int64_t> want = {
      {"swarm-out:a.1", 2}, {"swarm-out:b.2", 7}, {"swarm-out:nothing", 1}};
  EXPECT_EQ(out, want);
}

}  // namespace
}  // namespace mlasim::fuzz
