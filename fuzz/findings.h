// File: fuzz/findings.h
//
// Finding files on disk (docs/fuzzing.md): one scenario JSON per signature, named after it, with a
// `finding` object (signature, seed index, shrink steps, the violation and the quoted command that
// regenerates it). Written crash-safely (temp file, fsync, rename), read back by resumed
// campaigns, and merged across the folders of many shards by `mlasim fuzz merge`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/search.h"
#include "ref/status.h"
#include "sim/known_bugs.h"

namespace mlasim::fuzz {

// `signature` as a file name: characters other than [A-Za-z0-9_-] become '.', plus ".json".
std::string FindingFileName(const std::string& signature);

// Writes `text` to `path` so that a reader, or a writer killed at any instant, sees the old file
// or the new one, never part of one: into an unnamed file of the folder (O_TMPFILE; where the
// filesystem has none, into `tmp`), fsync, named `tmp` (same folder), renamed over `path`, and
// the folder synced. A kill can leave `tmp` behind only in the instant between naming and
// renaming (or, without O_TMPFILE, while writing); on failure `tmp` is removed. Errors:
// InvalidArgument(field, "cannot write PATH: reason").
Status WriteFileAtomic(const std::string& path, const std::string& tmp, const std::string& text,
                       const std::string& field);

// Removes the files of `dir` whose names start with `prefix` (a writer's temp files that a kill
// left behind; each writer uses its own prefix, so shards sharing a folder never remove each
// other's). Best effort: errors are ignored. Returns how many were removed.
int RemoveTempFiles(const std::string& dir, const std::string& prefix);

// One shell word: `word` itself when it has only [A-Za-z0-9_./:=,+@%-], else single-quoted, so
// that a shell neither globs nor splits it ("[3,0,1]" -> "'[3,0,1]'").
std::string ShellQuote(const std::string& word);

// What a campaign records with a finding besides the shrunk case.
struct FindingOrigin {
  uint64_t seed_index = 0;            // the campaign's seed index that first showed the signature
  std::vector<std::string> profiles;  // the campaign's --profile list
  bool profiles_are_default = true;   // then the reproduce command needs no --profile flags
  bool small = false;
  std::vector<std::string> generate;        // --generate families
  std::vector<std::string> contract_files;  // --contract files
  int max_shrink_steps = kDefaultShrinkSteps;
  bool swarm = false;  // --swarm on|off: the reproduce command always says which
  // --shrink: recorded as shrink.policy only for first-failure (absent: per-signature).
  ShrinkPolicy shrink = ShrinkPolicy::kPerSignature;
  const sim::KnownBug* known = nullptr;  // the known bug the violation belongs to, if any
  // A kernel-under-test finding: the `mlasim replay` flags that run it through the kernel again
  // (recorded as reproduce.replay, "mlasim replay FLAGS FILE"); "" otherwise.
  std::string replay_flags;
  bool kernel_inputs = false;  // generated with GenConfig::kernel_inputs (reproduce: --gpu)
  // The campaign's --gpu mode ("sentinel", "guard"): the reproduce command names it, so that a
  // copied command reads as the campaign ran (the generated case is the same for either).
  std::string gpu_mode = "sentinel";
  // Generated within a kernel's limits (GenConfig::kernel): "--kernel-under-test PATH
  // [--kernel-config TEXT]", which the reproduce command adds so that `fuzz --reproduce`
  // generates within the same limits; "" otherwise.
  std::string kernel_flags;
};

// The command that regenerates the shrunk case of `f` (the finding file's reproduce.command):
// `mlasim fuzz --reproduce SEED --size N --shrink-path '[...]'` with the campaign's shaping flags
// (--profile unless the default, --small, --generate, --contract, --gpu MODE) and --swarm.
std::string ReproduceCommand(const Failure& f, const FindingOrigin& origin);

// `mlasim replay [FLAGS ]PATH`: the command that replays a finding file at `path`, through the
// kernel under test when `replay_flags` (FindingOrigin::replay_flags) are given.
std::string ReplayCommand(const std::string& replay_flags, const std::string& path);

// Where a finding came from, as summaries print it: "seed index 25, 14 shrink steps" plus ", cut
// short by the 200-step budget" (`budget` < 0: the budget is not recorded); "seed index unknown"
// for files of older campaigns.
std::string OriginText(std::optional<uint64_t> seed_index, int steps, bool cut_short, int budget);

// The finding file's document: the shrunk scenario of `f` named after `signature`, and its
// `finding` object (signature, seed_index, shrink {steps, max_steps, cut_short[, policy]}, the violation
// with that signature, reproduce {seed, size, shrink_path, profiles, small, swarm, command,
// rc_params}, and `known` {name, upstream, fixed_in} when the violation belongs to a known bug).
// `f.broken` must show `signature` (MLASIM_ASSERT).
nlohmann::json FindingDocument(const Failure& f, const std::string& signature,
                               const FindingOrigin& origin);

// Whether `signature` is one a campaign writes: "step|call|buffer|access|class", step and call
// 1..128 of [A-Za-z0-9_-], buffer 1..128 of [A-Za-z0-9_.-], access read|write|run, class A..J
// or KUT-contract|KUT-numerics|KUT-fault (so FindingFileName is a visible name that maps back
// to one signature). Errors: InvalidArgument(field, what is wrong).
Status CheckSignature(const std::string& signature, const std::string& field);

// A finding file read back.
struct FindingRecord {
  std::string path;
  std::string text;  // the file's bytes
  std::string signature;
  std::optional<uint64_t> seed_index;  // absent in files of older campaigns
  int shrink_steps = 0;
  int max_shrink_steps = -1;  // the budget it was shrunk under (-1: not recorded)
  bool cut_short = false;
  std::string detail;
  std::string command;     // the reproduce command ("" in older files)
  std::string known_name;  // finding.known.name: the known bug it belongs to ("" = none)
  // The `mlasim replay` flags of reproduce.replay (a kernel-under-test finding; "" otherwise).
  std::string replay_flags;
  std::string
      scenario;  // the case alone (no name, no finding), compact JSON: what "smallest" ranks
};

// Reads one file. nullopt: JSON that is no finding (no `finding` object: another scenario file).
// Errors (field = the path): unreadable, malformed JSON, a `finding` without a signature
// CheckSignature accepts, an unknown key in finding or its objects, a seed_index, shrink or
// reproduce field of the wrong type or out of range (reproduce.size 1..1000, shrink_path items
// 0..999999), violation parts unlike the signature's; and the scenario refused by
// sim::ParseScenario (field "PATH: $.model.heads").
StatusOr<std::optional<FindingRecord>> ReadFindingFile(const std::string& path);

// The same from the file's text (`path` names it in errors and becomes FindingRecord::path): what
// ReadFindingFile does after reading, and what the finding_file fuzz harness runs.
StatusOr<std::optional<FindingRecord>> ParseFindingText(std::string text, const std::string& path);

// Every finding file (visible *.json) of `dir`, by file name. Errors: `dir` unreadable (field
// `field`), a file ReadFindingFile refuses, or a finding whose file is not named
// FindingFileName(signature). `skipped` (if given) gets the JSON files that
// hold no finding.
StatusOr<std::vector<FindingRecord>> ReadFindingDir(const std::string& dir,
                                                    const std::string& field,
                                                    std::vector<std::string>* skipped = nullptr);

// The order `merge` keeps the smallest case by: fewer bytes of the compact case JSON, then the
// case text, then the whole file text (a total order, so the choice never depends on which folder
// came first).
bool SmallerFinding(const FindingRecord& a, const FindingRecord& b);

// A shard's progress file (`.progress-I-of-N`) as merge reports it.
struct ShardRecord {
  std::string path;
  std::string identity;  // seed, profiles, options and shard, compact JSON
  uint64_t seed = 0;
  int32_t shard = 0, shards = 1;
  std::vector<std::string> profiles;
  bool small = false, ignore_known = false;
  int64_t cases = 0;  // committed seed indices of the shard (next_index)
  int copies = 1;     // folders holding this shard's progress (the largest `cases` is kept)
};

struct MergeResult {
  std::map<std::string, FindingRecord> findings;  // by signature: the smallest case
  std::map<std::string, int> folders_with;        // signature -> folders that had it
  std::vector<ShardRecord> shards;                // by identity
  int64_t cases = 0;                              // over distinct shards
  std::vector<std::string> skipped;               // JSON files without a finding
  std::vector<std::string> written;               // files written into out_dir (changed ones)
};

// `mlasim fuzz merge DIR... [--out OUT]`: one finding per signature over every folder (OUT's own
// findings included), keeping the smallest case (SmallerFinding), and the shards' case counts.
// With `out_dir` the kept files are written there as FindingFileName(signature), atomically; a
// file already holding those bytes is left alone. Deterministic: the same result and bytes for
// the folders in any order. Errors: a folder that is missing or unreadable (field "DIR"), a
// folder of `dirs` that holds neither a progress file (`.progress-I-of-N`) nor a finding file
// ("DIR": "... holds no shard output ..."; OUT's own folder may be empty), a malformed finding or
// progress file (field = its path), OUT not writable ("--out").
StatusOr<MergeResult> MergeFindingDirs(const std::vector<std::string>& dirs,
                                       const std::string& out_dir);

}  // namespace mlasim::fuzz
