// File: fuzz/progress.h
//
// A campaign shard's progress file, DIR/.progress-I-of-N (docs/fuzzing.md): which campaign it
// belongs to, how far the shard got (the committed seed-index prefix and the seconds spent, so a
// budget counts the whole campaign across --resume) and the signatures its committed cases
// showed. Written by the campaign at every checkpoint, read by --resume and by `fuzz merge`.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ref/status.h"

namespace mlasim::fuzz {

// Version of the file's meaning. 2: every violation's signature is recorded (format 1, the first
// violation's only, cannot be resumed: its shard would report other findings).
inline constexpr int kProgressFormat = 2;

// What a progress file must match to be resumed: the campaign that wrote it.
struct CampaignIdentity {
  uint64_t seed = 1;
  std::vector<std::string> profiles;
  bool small = false;
  bool ignore_known = false;
  std::vector<std::string> generate;        // generator families (--generate)
  std::vector<std::string> contract_files;  // --contract files, as given
  bool swarm = false;                       // --swarm (absent in older files: off)
  // --shrink (fuzz/search.h ShrinkPolicyName; absent in older files: per-signature).
  std::string shrink = "per-signature";
  int32_t shard = 0, shards = 1;
  int max_shrink_steps = 200;
  // --step-numerics-every (absent in older files: 0, the numerics never ran).
  int64_t step_numerics_every = 0;
  // A kernel-under-test campaign (fuzz --gpu): the kernel, its config, the mode and head dims
  // (fuzz/kut_pool.h); "" for a simulator campaign (the key is then absent from the file).
  std::string kernel;
};
nlohmann::json IdentityJson(const CampaignIdentity& id);

struct Progress {
  CampaignIdentity identity;
  int64_t next_index = 0;    // every seed index of the shard below it is committed
  double seconds_spent = 0;  // over every run of the campaign (resumes add to it)
  // The targets of the committed cases: every violation's signature (under --shrink
  // first-failure, each case's first violation's).
  std::set<std::string> signatures;
};

// ".progress-I-of-N".
std::string ProgressFileName(int32_t shard, int32_t shards);
// The file's text (one JSON line).
std::string ProgressText(const Progress& p);

// Largest next_index a progress file may hold.
inline constexpr int64_t kMaxProgressIndex = int64_t{1} << 50;

// Reads a progress file. Errors (field `field`; the reason starts with the path): unreadable,
// malformed JSON, another format, a missing or mistyped field (named), next_index outside
// 0..2^50, seconds_spent negative or not finite.
StatusOr<Progress> ReadProgressFile(const std::string& path, const std::string& field);

// The same from the file's text (`path` only names it in errors): what ReadProgressFile does
// after reading, and what the progress_file fuzz harness runs.
StatusOr<Progress> ParseProgressText(const std::string& text, const std::string& path,
                                     const std::string& field);

}  // namespace mlasim::fuzz
