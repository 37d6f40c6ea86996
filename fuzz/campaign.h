// File: fuzz/campaign.h
//
// `mlasim fuzz`: generate engine steps from seeds, replay them, and keep one shrunk, replayable
// case per distinct failure signature (step|call|buffer|access|class). Findings are written
// atomically (temp file + rename) the moment they are found, so a crash or kill -9 loses none
// already reported; --resume continues a shard from its progress file. --shard I/N splits the
// seed space: shard I tests seed indices I, I+N, I+2N, ..., so N machines never repeat work and
// their finding directories merge without conflicts (file names are the signatures).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "ref/status.h"

namespace mlasim::fuzz {

struct CampaignOptions {
  double seconds = 10;
  int64_t max_cases = -1;  // stop after this many cases (-1: time only)
  uint64_t seed = 1;       // base seed (a 40-hex commit hash is accepted by the CLI)
  int32_t jobs = 1;        // worker threads
  int32_t shard = 0, shards = 1;
  std::vector<std::string> profiles = {"atom-2026-08"};
  bool ignore_known = false;  // skip the documented families (fuzz/properties.h)
  bool small = false;         // B <= 64: throughput runs
  std::string out_dir;        // "" = do not write findings
  bool resume = false;
};

struct CampaignFinding {
  std::string signature;
  uint64_t seed_index = 0;
  std::string file;  // written case, if out_dir was given
  std::string detail;
};

struct CampaignSummary {
  int64_t cases = 0;
  double seconds = 0;
  std::map<std::string, CampaignFinding> findings;  // by signature
  std::map<std::string, int64_t> coverage;          // feature -> cases exercising it
  int64_t next_index = 0;                           // first seed index not tested (per shard)
};

// Progress callback: cases so far, findings so far, seconds elapsed.
using ProgressFn = std::function<void(int64_t, int64_t, double)>;

StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& options, const ProgressFn& progress);

// Parses "I/N" (0 <= I < N). Errors name --shard.
Status ParseShard(const std::string& text, int32_t* shard, int32_t* shards);
// Seeds: decimal, 0x-hex, or a 40-hex git commit (folded to 64 bits). Errors name --seed.
StatusOr<uint64_t> ParseSeed(const std::string& text);

}  // namespace mlasim::fuzz
