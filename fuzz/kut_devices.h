// File: fuzz/kut_devices.h
//
// `mlasim fuzz --gpu ... --devices all|LIST` (docs/kernel-under-test.md, "Several GPUs"): one campaign process
// per listed device (each with its own worker pool and device context), the campaign's seed
// indices sharded across them, their findings merged into --out. Worker w of W running shard
// I/N tests shard (I + N w)/(N W), i.e. seed indices I + N (w + W k), and a case budget of C
// becomes ceil((C - w) / W) cases for it, so together they test exactly the seed indices one
// process tests. For every signature the finding of the lowest seed index is kept (a single
// process keeps that one too: it shrinks a signature at the first index showing it), so the
// merged folder holds the same finding files, byte for byte, as one process with the same seed
// and case budget. A process that ends abnormally (not exit 0, 1 or 4) is started again with
// --resume, at most `max_restarts` times, then taken out with a message; the others go on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fuzz/findings.h"
#include "ref/status.h"

namespace mlasim::fuzz {

struct DeviceCampaignOptions {
  std::string exe;                // the mlasim binary
  std::vector<std::string> args;  // `fuzz` and the campaign's flags, without --devices, --device,
                                  // --shard, --cases and --out
  std::vector<std::string> devices;  // one process each ("0,0": two sharing GPU 0)
  int32_t shard = 0, shards = 1;
  int64_t max_cases = -1;
  std::string out_dir;  // the merged findings; the processes' folders are under OUT/.devices/
  bool resume = false;
  int max_restarts = 2;
};

struct DeviceProcess {
  std::string device;
  std::string shard;  // "I/N"
  std::string dir;    // its --out
  std::string log;    // its stdout and stderr
  int64_t budget = -1;
  int64_t cases = 0;  // committed seed indices (its progress file)
  int exit_code = -1;
  int restarts = 0;
  bool taken_out = false;
};

struct DeviceCampaignSummary {
  std::vector<DeviceProcess> processes;
  int64_t cases = 0;
  double seconds = 0;
  std::map<std::string, FindingRecord> findings;  // merged: the lowest seed index per signature
  std::set<std::string> earlier;                  // signatures in --out before the run
  bool cut_short = false;                         // a process ended before its case budget
};

// Progress: cases committed by all processes, findings in their folders, seconds.
using DeviceProgressFn = std::function<void(int64_t, int64_t, double)>;

// Errors: InvalidArgument naming --devices (an empty list), --out (cannot create or write), or a
// malformed finding file of a process.
StatusOr<DeviceCampaignSummary> RunDeviceCampaign(const DeviceCampaignOptions& options,
                                                  const DeviceProgressFn& progress);

// The findings of `dirs` merged into `out_dir` (written there atomically unless a file with the
// same bytes exists): per signature the lowest seed index, ties by SmallerFinding. Findings
// already in `out_dir` win. Returns the kept records by signature.
StatusOr<std::map<std::string, FindingRecord>> MergeLowestSeedIndex(
    const std::vector<std::string>& dirs, const std::string& out_dir);

// "all" (every visible device) or a comma list of device numbers. Errors name --devices.
StatusOr<std::vector<std::string>> ParseDevices(const std::string& text);

}  // namespace mlasim::fuzz
