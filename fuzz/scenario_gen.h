// File: fuzz/scenario_gen.h
//
// RapidCheck generators for engine steps (issue 5): batches of 1-512 requests with lengths weighted
// toward the edges, MTP K 0-7 with rejected drafts, capture lists and the padded rung, heads and TP
// (including shapes that fold or are refused), sparse top-k, DCP and DP, targets, revisions,
// kernel variants, allocator models and engine profiles. Every choice shrinks toward the smallest,
// most readable case: one or two requests, K = 1, a capture list of one size.
#pragma once

#include <rapidcheck.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fuzz/kernel_limits.h"
#include "ref/status.h"
#include "sim/scenario.h"

namespace mlasim::fuzz {

// What a fault report gives (`mlasim triage`, fuzz/triage.h): held fixed in every generated case.
// The generator then draws only what the report does not give: the batch contents (context
// lengths, rejected drafts of the previous and this verify, the indexer's top-k counts) with the
// draws of GenScenario's requests, and the allocator's layout (page size; for the caching model
// the live tensors allocated before each call). `base` holds everything else, `batch` requests
// are drawn.
struct ReportPins {
  sim::Scenario base;  // requests empty; kernel, allocator model and engine profile set
  int32_t batch = 1;
};

struct GenConfig {
  std::vector<std::string> profiles = {"atom-2026-08", "atom-2026-11"};
  bool sparse_only = false;  // the family the #2715 fix covers
  bool allow_dcp = true;
  bool allow_dp = true;
  int32_t max_batch = 512;
  bool small = false;  // B <= 64, fewer draft steps: throughput runs
  // Families beyond the engine as it runs (`mlasim fuzz --generate LIST`; swarm runs switch them
  // per case): a modelled KV cache with hostile index values (-1, past the cache, 2^31 - 1,
  // 2147480000); the per-call disagreements of docs/scenario.md "calls" and "sizing" (launch
  // grids, q/o rows, the kernel's row view, planner vs sizing inputs, metadata from capture);
  // dense steps over pages of 16 or 64 tokens; ragged per-request verify q lengths 0..Q
  // (batch.q_lens).
  bool hostile_indices = false;
  bool disagreements = false;
  bool paged = false;
  bool ragged_q = false;
  // Contracts that replace the built-in ones in every generated case (`fuzz --contract`).
  std::vector<std::shared_ptr<const sim::Contract>> contracts;
  // Kernel-under-test campaigns (fuzz --gpu, docs/kernel-under-test.md): sparse steps may model the KV cache
  // with a few hostile index values (-1, -2, INT_MAX, INT_MIN) in the indexer's top-k regions,
  // so a kernel meets the invalid indices its contract must handle.
  bool kernel_inputs = false;
  // The kernel under test's limits (fuzz/kernel_limits.h): dense / sparse, KV dtype and page size
  // of every case are kept within them. The default limits nothing (the cases of before).
  KernelLimits kernel;
  // Swarm generation (`mlasim fuzz --swarm on`, SwarmKnobs): every case first leaves a random
  // subset of the knobs' options out, then generates within what is left. false: the generator
  // of `--swarm off`, whose cases are those of the generator before swarm, byte for byte.
  bool swarm = false;
  // Triage: set, every case is `pins->base` with the drawn batch and allocator layout (the
  // fields above are not read).
  std::shared_ptr<const ReportPins> pins;
};

// Swarm testing (Groce, Zhang, Eide, Chen, Regehr, "Swarm Testing", ISSTA 2012): before a case is
// generated, each option of each knob is left out with probability 1/2 (a knob whose options are
// all left out keeps them all), so a case draws from a few features at a time and combinations
// that the weights make rare (DCP with eager mode, bf16 and the HK kernel) come up without
// hand-tuned weights. Binary knobs (dcp: off, on) leave out either side: leaving out "off"
// forces the feature on. A knob with one option in `config` (one profile, sparse_only, a
// --generate family not enabled) is not drawn.
struct SwarmKnob {
  std::string name;                  // "kernel"
  std::vector<std::string> options;  // {"asm", "opus", "hk"}: the order of the omitted bits
};
// The knobs `config` draws, in draw order: profile (config.profiles), model, mtp_k, kv_dtype,
// graph, dcp, dp, kernel, allocator, kv_granularity, max_split, topk_lengths, hostile_indices,
// disagreements (the call and sizing overrides: launch grid, o rows, kernel heads, planner CU
// count, sizing batch, plan from capture), paged, q_lens (uniform, ragged). Empty when
// config.swarm is false.
std::vector<SwarmKnob> SwarmKnobs(const GenConfig& config);

// One case's swarm configuration: omitted[k] bit i set = option i of SwarmKnobs(config)[k] left
// out; 0 = nothing left out. Empty when config.swarm is false.
struct SwarmDraw {
  std::vector<uint32_t> omitted;
};
// The swarm configuration of the case ScenarioFromSeed(config, seed, size) generates (its
// unshrunk value: the draws come first in the generator, so they are the same). Empty without
// config.swarm and with config.pins (the pinned generator draws no swarm).
SwarmDraw SwarmFromSeed(const GenConfig& config, uint64_t seed, int size);
// "kernel.asm" for every option `draw` leaves out, in knob order.
std::vector<std::string> SwarmOmittedNames(const GenConfig& config, const SwarmDraw& draw);
// The same names made once per config: keys[k][i] = `prefix` + the name of option i of
// SwarmKnobs(config)[k] ("swarm-out:kernel.asm"), for a campaign that counts every case's
// omitted options (bit i of SwarmDraw::omitted[k] names keys[k][i]) without building them anew.
std::vector<std::vector<std::string>> SwarmOptionKeys(const GenConfig& config,
                                                      const std::string& prefix);

// The names `--generate` takes, in the order GenConfig lists them.
const std::vector<std::string>& GeneratorFamilies();
// Switches the families named in `names` on. Errors: InvalidArgument("--generate") naming an
// unknown family and listing the known ones, or a family named twice.
Status EnableFamilies(const std::vector<std::string>& names, GenConfig* config);

rc::Gen<sim::Scenario> GenScenario(const GenConfig& config);

// A deterministic scenario from a 64-bit seed (campaigns): RapidCheck's generator driven by an
// explicit random source, so seed ranges can be sharded across machines. The Shrinkable is lazy:
// its value() and shrinks() run generator code.
rc::Shrinkable<sim::Scenario> ScenarioFromSeed(const GenConfig& config, uint64_t seed, int size);
// ScenarioFromSeed(config, seed, size).value() and, in *swarm, SwarmFromSeed(config, seed, size),
// generating once: the swarm is the one the generator drew first, not a second run of its draws
// (campaigns: one generator run per case). `swarm` must not be null. Drawn directly
// (fuzz/draw.h): the same values as RapidCheck's generator, without its Gen / Shrinkable
// machinery (a case costs about a third of what it did through RapidCheck), and thread-safe
// (no RapidCheck state: no GeneratorMutex). SwarmFromSeed draws directly too.
sim::Scenario ScenarioAndSwarmFromSeed(const GenConfig& config, uint64_t seed, int size,
                                       SwarmDraw* swarm);

// RapidCheck keeps the generation context in process-wide state, so running generators on two
// threads at once corrupts it (crashes "operator* is not allowed in this context"). Hold this
// mutex around every ScenarioFromSeed / value() / shrinks() / next() when threads may generate
// concurrently (mlasim fuzz --jobs); replays of the generated scenarios and the direct draws
// (ScenarioAndSwarmFromSeed, SwarmFromSeed) need no lock.
std::mutex& GeneratorMutex();

}  // namespace mlasim::fuzz
