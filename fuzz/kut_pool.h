// File: fuzz/kut_pool.h
//
// Worker processes that run steps through a kernel under test (docs/kernel-under-test.md, "Workers"). The
// library is only ever loaded in a worker (`mlasim fuzz --kut-worker`, an exec of the mlasim
// binary), so a crash, a device fault or a hang ends the worker, not the campaign: the pool
// turns it into a finding attributed to the kernel call in flight (and, for a host fault, to the
// buffer whose guard page or sentinel bytes the address falls in; for a device fault, to the
// buffer whose guard page faults when the call is run again with that buffer alone guarded),
// replaces the worker and resumes the step after that call.
//
// Protocol (one line each way; JSON without newlines):
//   parent -> worker  {"scenario": {...}, "start_call": K, "end_call": N, "guard_only": NAME}
//   worker -> parent  D {description}        once, after loading the library
//                     X {"error": ...}        the library was refused (then the worker exits)
//                     P {running}             before each kernel call (fuzz/kut_check.h hook)
//                     C {call report}         after each decode call (and its reduce)
//                     E {step}                the step is done: plans, findings, device
//                     F {fault}               the kernel faulted (the worker then exits)
// Other lines (the library's own output) are kept as the worker's last words.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/kut_check.h"
#include "fuzz/kut_library.h"
#include "fuzz/search.h"
#include "ref/status.h"

namespace mlasim::fuzz {

struct KutPoolOptions {
  std::string worker_exe;            // the mlasim binary (the CLI: /proc/self/exe)
  std::string library;               // --kernel-under-test
  std::string config;                // --kernel-config
  KutCheckOptions check;             // what every worker checks
  std::vector<std::string> devices;  // per worker, round robin: the device it sees ("" = all)
  int32_t workers = 1;
  double timeout_seconds = 120;  // a kernel call that runs longer is a hang (CheckKernelTimeout)
};

// The range of `--kernel-timeout` (KutPoolOptions::timeout_seconds), in seconds. The pool waits
// for a worker's next line with poll(2), whose timeout is whole milliseconds, and rounds the time
// left up to the next millisecond: 1 ms is the shortest wait it can honour (a shorter one would
// end before it began); the longest is a day.
inline constexpr double kKernelTimeoutMinSeconds = 0.001;
inline constexpr double kKernelTimeoutMaxSeconds = 86400;

// OK when `seconds` is in [kKernelTimeoutMinSeconds, kKernelTimeoutMaxSeconds]. The one check of
// the value for every command that takes `--kernel-timeout` (fuzz, replay) and for
// KutPool::Start. Errors: InvalidArgument("--kernel-timeout", "must be in 0.001..86400 seconds
// (...; got 1e-300)"), NaN and infinities included.
Status CheckKernelTimeout(double seconds);

// What one step through the kernel gave (the workers' reports stitched together).
struct KutStepResult {
  std::string device;
  std::vector<nlohmann::json> plans;  // GPU planner checks
  std::vector<nlohmann::json>
      calls;  // one report per decode call (docs/kernel-under-test.md "Report")
  std::vector<sim::Violation> findings;
  std::vector<std::string> notes;  // worker replacements, faults, errors, in order
  std::string error;               // the step could not be checked at all (a replay error)
};

class KutWorker;

// A skip, unsupported or not-compared reason as an outcome key of KutPool::CallOutcomes /
// NumericsOutcomes: whole up to 400 characters (every reason the harness and the reference give
// is shorter), else cut at the last blank at or before character 397 and ended with "..." (397
// characters and "..." when there is none): a kernel library's answer can be any length.
std::string CutReason(std::string reason);

class KutPool {
 public:
  // Starts one worker to load and describe the library. Errors: InvalidArgument(
  // "--kernel-under-test") with the worker's reason (another ABI version, a missing symbol, a
  // crash while loading or describing, an unusable description), or a worker that cannot start;
  // InvalidArgument("--kernel-timeout") outside its range (CheckKernelTimeout).
  static StatusOr<std::unique_ptr<KutPool>> Start(const KutPoolOptions& options);
  ~KutPool();

  const KutDescription& description() const { return desc_; }
  // Runs the step of `s` on a free worker (blocks until one is free; thread-safe).
  KutStepResult Check(const sim::Scenario& s);
  int64_t restarts() const;
  // Device faults that did not recur when their call ran again alone (not findings; under an
  // NVIDIA MPS daemon, a fault of one worker ends every worker on the GPU).
  int64_t faults_not_recurring() const;
  // Whether a device fault under an MPS daemon made the pool start its workers outside it.
  bool left_mps() const { return left_mps_.load(); }
  // Whether an NVIDIA MPS daemon listened when the pool started (its control socket or FIFO in
  // CUDA_MPS_PIPE_DIRECTORY accepted a connection): the workers start as its clients.
  bool under_mps() const { return mps_; }
  // Seconds the workers spent, by part (replay, inputs, kernel, reference, checks, plans), and
  // "steps": the steps they checked.
  std::map<std::string, double> Timing() const;
  // Decode calls of the steps checked, by outcome: "run" (the kernel ran it), "skipped: WHY"
  // (not the kernel's shape, refused by the engine's guard, ...: never called) and
  // "unsupported: WHY" (the kernel answered MLASIM_KUT_UNSUPPORTED), WHY whole up to 400
  // characters.
  std::map<std::string, int64_t> CallOutcomes() const;
  // Numerics of the decode calls run, by outcome: "compared" or "not compared: WHY" (the
  // reference's refusal, e.g. above the CPU reference's work bound), WHY whole up to 400
  // characters.
  std::map<std::string, int64_t> NumericsOutcomes() const;
  // Decode calls the kernel ran, by the formats the harness handed it: "q Q, kv KV" (dtype names
  // of kernels/mlasim_kut.h, e.g. "q fp8_e4m3fn, kv fp8_e4m3fn").
  std::map<std::string, int64_t> CallFormats() const;

 private:
  explicit KutPool(const KutPoolOptions& o);
  std::unique_ptr<KutWorker> Take();
  void Give(std::unique_ptr<KutWorker> w);
  // A worker that has loaded and described the library (nullptr and `error` when it could not).
  // `isolated`: outside any NVIDIA MPS daemon (KutWorker::Spawn).
  std::unique_ptr<KutWorker> NewWorker(std::string* error, bool isolated = false);
  // How a rerun of one call ended.
  enum class RerunEnd { kClean, kFaultedThere, kFaultedElsewhere, kNoWorker };
  // Runs the decode call of `running` (with its reduce) once more on a fresh isolated worker,
  // guarding only `guard_only` when it is not empty, as the campaign's mode does otherwise; the
  // worker's fault report into `fault`. The worker is ended afterwards.
  // The rerun itself, on worker `w` (which it does not end).
  RerunEnd RerunOn(KutWorker& w, const nlohmann::json& scenario, const nlohmann::json& running,
                   const std::string& guard_only, nlohmann::json* fault);
  RerunEnd RerunAlone(const nlohmann::json& scenario, const nlohmann::json& running,
                      const std::string& guard_only, nlohmann::json* fault);
  // Takes the place of a worker that ended: a new worker starts on a thread of its own (loading
  // the library and, for a device kernel, creating its GPU context, ~1-2 s on the H200) while
  // the other workers run, and joins the idle ones when ready; one that cannot start frees the
  // place, so the next Take starts one in the foreground and reports why.
  void ReplaceInBackground();
  nlohmann::json AttributeDeviceFault(const nlohmann::json& scenario, const nlohmann::json& running,
                                      const nlohmann::json& fault);
  // One attempt of Check on worker `w` from call `start`: true when the step ended ('E'), with
  // its results in `res`; false when the worker ended or hung first, with the last call it
  // announced in `running` and its fault report (or a hang) in `fault`.
  // `next_start`: past the last call reported ('C'); `running` is cleared at each report.
  bool RunOnWorker(KutWorker& w, const nlohmann::json& scenario, int32_t start, KutStepResult& res,
                   nlohmann::json& running, nlohmann::json& fault, int32_t& next_start);
  // A call's report ('C') and the step's end ('E') into `res` and the pool's counters.
  void AddCallReport(const nlohmann::json& j, KutStepResult& res);
  void AddStepEnd(const nlohmann::json& j, KutStepResult& res);
  // The worker ended or hung in the call `running` names: its finding into `res`; the call to
  // resume from, or -1 (res.error set) when it ended outside a kernel call.
  int32_t AddWorkerEnd(const nlohmann::json& scenario, const nlohmann::json& running,
                       nlohmann::json fault, const std::string& how, const std::string& last_words,
                       KutStepResult& res);

  KutPoolOptions o_;
  KutDescription desc_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<KutWorker>> idle_;
  int32_t live_ = 0;                  // workers idle or lent out (under mu_)
  int64_t started_ = 0;               // workers started (under mu_)
  int64_t restarts_ = 0;              // workers replaced after a fault or hang (under mu_)
  int64_t faults_not_recurring_ = 0;  // (under mu_)
  bool mps_ = false;                  // the workers are clients of an MPS daemon
  // Set at the first device fault under MPS: a fault there ends every client on the GPU and the
  // daemon takes no new one until all have exited, so the campaign goes on without it (slower,
  // each fault one worker's again).
  std::atomic<bool> left_mps_{false};
  std::map<std::string, double> timing_;     // (under mu_)
  std::map<std::string, int64_t> outcomes_;  // CallOutcomes (under mu_)
  std::map<std::string, int64_t> numerics_;  // NumericsOutcomes (under mu_)
  std::map<std::string, int64_t> formats_;   // CallFormats (under mu_)
  struct Replacer {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Replacer> replacers_;  // ReplaceInBackground's threads, joined when done (under mu_)
};

// The findings of the kernel under test for one replayed step (the step's scenario runs on a
// worker). With `ignore_known`, findings the simulator already files under a known family
// (fuzz/properties.h IsKnownFamily) are dropped.
Property KutProperty(KutPool* pool, bool ignore_known);

// The mlasim binary workers run: $MLASIM_EXE when set (a program that embeds the CLI, e.g. the
// test binary, names the real binary), else this process's own executable.
std::string WorkerExe();

// The worker's main loop (`mlasim fuzz --kut-worker`): loads the library, answers D or X, then
// one step per request line from `in` until EOF. Returns the exit code.
int KutWorkerMain(std::istream& in, int out_fd, const std::string& library,
                  const std::string& config, const KutCheckOptions& check);

}  // namespace mlasim::fuzz
