#include "fuzz/kut_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <stdexcept>

#include "fuzz/kut_memory.h"
#include "fuzz/properties.h"
#include "kernels/gpu_api.h"
#include "sim/json_input.h"
#include "sim/os_error.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {

using nlohmann::json;

namespace {

// CUDA_MPS_PIPE_DIRECTORY of an isolated worker: no daemon listens there.
constexpr char kNoMpsPipeDirectory[] = "/nonexistent/mlasim-worker-outside-mps";

// Whether something listens on the special file `path`: a UNIX socket accepts a connection, a
// FIFO has a reader (a non-blocking open for writing fails with ENXIO without one). Closed at once.
bool Listening(const std::string& path, const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }
  if (!S_ISSOCK(st.st_mode)) return false;
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return true;  // cannot probe: the socket says enough
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  // Only a refused connection says nobody listens (a socket of another type than this probe's
  // says EPROTOTYPE, yet a daemon is there).
  const bool refused = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 &&
                       errno == ECONNREFUSED;
  ::close(fd);
  return !refused;
}

// Whether this process's workers are clients of an NVIDIA MPS daemon: the daemon's control file
// (a UNIX socket with the H200's driver 580; a FIFO is taken too) is in the folder
// CUDA_MPS_PIPE_DIRECTORY names, or in its default one, and something listens on it (a daemon
// that was killed leaves its folder and socket behind).
bool MpsDaemonVisible() {
  const char* env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  struct stat st {};
  const std::string dir = env != nullptr && *env != 0 ? env : "/tmp/nvidia-mps";
  const std::string control = dir + "/control";
  return ::stat(control.c_str(), &st) == 0 && Listening(control, st);
}

}  // namespace

// ---- one worker process ------------------------------------------------------------------------
class KutWorker {
 public:
  ~KutWorker() { Stop(); }

  // fork + exec `argv`, with the device it sees; pipes for stdin and stdout (+ stderr). An
  // `isolated` worker is no client of an NVIDIA MPS daemon (its pipe folder set to one that
  // does not exist, so the driver makes an ordinary context): a fault of another client does not
  // end it, and it can start while the daemon waits for the clients of a fault to exit.
  bool Spawn(const std::vector<std::string>& argv, const std::string& device, bool isolated,
             std::string* error) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      if (!device.empty()) {
        ::setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
        ::setenv("HIP_VISIBLE_DEVICES", device.c_str(), 1);
      }
      if (isolated) ::setenv("CUDA_MPS_PIPE_DIRECTORY", kNoMpsPipeDirectory, 1);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      const char msg[] = "X {\"error\": \"cannot run the worker binary\"}\n";
      (void)!::write(1, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    return true;
  }

  bool Send(const std::string& line) {
    std::string s = line + "\n";
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t w = ::write(to_, s.data() + off, s.size() - off);
      if (w <= 0) return false;
      off += static_cast<size_t>(w);
    }
    return true;
  }

  enum class Read { kLine, kEof, kTimeout };
  // The next line from the worker, waiting at most `seconds`.
  Read Next(double seconds, std::string* line) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (true) {
      if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
        *line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return Read::kLine;
      }
      // Rounded up: a wait never ends before its deadline (kKernelTimeoutMinSeconds).
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Read::kTimeout;
      pollfd p{from_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return Read::kTimeout;
      char chunk[1 << 16];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!buf_.empty()) {  // a last line without its newline
          *line = buf_;
          buf_.clear();
          return Read::kLine;
        }
        return Read::kEof;
      }
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Ends the worker (SIGKILL if it is still running) and returns how it ended.
  std::string Stop() {
    if (pid_ <= 0) return "";
    if (to_ >= 0) ::close(to_), to_ = -1;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) {
      ::kill(pid_, SIGKILL);
      r = ::waitpid(pid_, &status, 0);
    }
    if (from_ >= 0) ::close(from_), from_ = -1;
    pid_ = -1;
    if (r <= 0) return "unknown";
    if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
    return fmt::format("exit {}", WEXITSTATUS(status));
  }

  std::string last_words;  // the last line that was not protocol

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_;
};

namespace {

std::vector<std::string> WorkerArgs(const KutPoolOptions& o) {
  const KutCheckOptions& c = o.check;
  std::vector<std::string> a = {o.worker_exe,
                                "fuzz",
                                "--kut-worker",
                                "--kernel-under-test",
                                o.library,
                                "--gpu",
                                c.guard ? "guard" : "sentinel",
                                "--head-dims",
                                fmt::format("{},{}", c.head_dim_qk, c.head_dim_v),
                                "--reference",
                                c.reference};
  if (!c.gpu_plans) a.push_back("--no-gpu-plans");
  if (!c.device_inputs) a.push_back("--host-inputs");
  if (c.skip_known_faults) a.push_back("--skip-known-faults");
  if (!o.config.empty()) a.insert(a.end(), {"--kernel-config", o.config});
  return a;
}

// The prefix and JSON of a protocol line; false for other output.
bool Parse(const std::string& line, char* tag, json* j) {
  if (line.size() < 3 || line[1] != ' ' || std::strchr("DXPCEF", line[0]) == nullptr) return false;
  // Strict and bounded (ref/limits.h json_depth, json_values): the line comes from a process
  // that loaded an untrusted library, which may write to its stdout.
  auto parsed = sim::ParseJsonStrict(line.substr(2), "worker");
  if (!parsed.ok()) return false;
  *j = std::move(*parsed);
  *tag = line[0];
  return true;
}

}  // namespace

std::unique_ptr<KutWorker> KutPool::NewWorker(std::string* error, bool isolated) {
  auto w = std::make_unique<KutWorker>();
  std::string device;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!o_.devices.empty()) device = o_.devices[started_ % o_.devices.size()];
    ++started_;
  }
  // After a device fault under MPS every new worker stays outside the daemon (LeaveMps).
  if (!w->Spawn(WorkerArgs(o_), device, isolated || left_mps_.load(), error)) return nullptr;
  std::string line;
  while (true) {
    const KutWorker::Read r = w->Next(o_.timeout_seconds, &line);
    if (r != KutWorker::Read::kLine) {
      const std::string how = w->Stop();
      *error =
          r == KutWorker::Read::kTimeout
              ? fmt::format("{}: loading or describing it did not finish within {} s", o_.library,
                            o_.timeout_seconds)
              : fmt::format("{}: the worker ended while loading or describing it ({}){}",
                            o_.library, how, w->last_words.empty() ? "" : ": " + w->last_words);
      return nullptr;
    }
    char tag;
    json j;
    if (!Parse(line, &tag, &j)) {
      w->last_words = line;
      continue;
    }
    if (tag == 'X') {
      *error = j.value("error", std::string("refused"));
      w->Stop();
      return nullptr;
    }
    if (tag == 'F') {
      w->Stop();
      *error = fmt::format("{}: crashed while loading or describing it (signal {})", o_.library,
                           j.value("signal", 0));
      return nullptr;
    }
    if (tag != 'D') continue;
    if (desc_.name.empty()) {
      auto d = KutDescription::FromJson(j);
      if (!d.ok()) {
        *error = d.status().message();
        return nullptr;
      }
      desc_ = std::move(*d);
    }
    return w;
  }
}

Status CheckKernelTimeout(double seconds) {
  if (seconds >= kKernelTimeoutMinSeconds && seconds <= kKernelTimeoutMaxSeconds)
    return OkStatus();  // NaN fails both comparisons
  return InvalidArgumentError(
      "--kernel-timeout",
      fmt::format("must be in {}..{} seconds (1 ms, the shortest wait the pool can honour, to a "
                  "day; got {})",
                  kKernelTimeoutMinSeconds, kKernelTimeoutMaxSeconds, seconds));
}

StatusOr<std::unique_ptr<KutPool>> KutPool::Start(const KutPoolOptions& options) {
  MLASIM_RETURN_IF_ERROR(CheckKernelTimeout(options.timeout_seconds));
  if (options.workers < 1 || options.workers > 256)
    return InvalidArgumentError("--jobs", "workers must be in 1..256");
  // A missing, unreadable or non-file library is named with its cause before a worker starts.
  MLASIM_RETURN_IF_ERROR(sim::CheckReadableFile("--kernel-under-test", options.library));
  std::unique_ptr<KutPool> pool(new KutPool(options));
  pool->mps_ = MpsDaemonVisible();
  std::string error;
  std::unique_ptr<KutWorker> w = pool->NewWorker(&error);
  if (w == nullptr) return InvalidArgumentError("--kernel-under-test", error);
  pool->live_ = 1;
  pool->idle_.push_back(std::move(w));
  return pool;
}

KutPool::KutPool(const KutPoolOptions& o) : o_(o) {}
KutPool::~KutPool() {
  std::vector<Replacer> replacers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    replacers.swap(replacers_);
  }
  for (Replacer& r : replacers) r.thread.join();
}

void KutPool::ReplaceInBackground() {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = replacers_.begin(); it != replacers_.end();) {  // join the finished ones
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = replacers_.erase(it);
  }
  replacers_.push_back({std::thread([this, done] {
                          std::string error;
                          Give(NewWorker(&error));  // nullptr: the place is free again
                          done->store(true);
                        }),
                        done});
}

int64_t KutPool::restarts() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return restarts_;
}

int64_t KutPool::faults_not_recurring() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return faults_not_recurring_;
}

std::map<std::string, double> KutPool::Timing() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return timing_;
}

std::map<std::string, int64_t> KutPool::CallOutcomes() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return outcomes_;
}

std::map<std::string, int64_t> KutPool::NumericsOutcomes() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return numerics_;
}

std::map<std::string, int64_t> KutPool::CallFormats() const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
  return formats_;
}

std::string CutReason(std::string s) {
  constexpr size_t kMaxReason = 400;
  if (s.size() <= kMaxReason) return s;
  const size_t blank = s.rfind(' ', kMaxReason - 3);
  s.resize(blank == std::string::npos || blank == 0 ? kMaxReason - 3 : blank);
  return s + "...";
}

namespace {

// "run", "skipped: WHY" or "unsupported: WHY" of one call report (fuzz/kut_check.h).
std::string Outcome(const json& report) {
  if (report.contains("skipped")) return "skipped: " + CutReason(report.value("skipped", ""));
  for (const json& run : report.value("runs", json::array()))
    if (run.contains("unsupported"))
      return "unsupported: " + CutReason(run.value("unsupported", ""));
  return "run";
}

// "q Q, kv KV" of the decode run of one call report that ran (KutPool::CallFormats); "" when its
// decode did not run.
std::string Formats(const json& report) {
  for (const json& run : report.value("runs", json::array()))
    if (run.value("op", "") == "decode" && run.contains("q_dtype"))
      return "q " + run.value("q_dtype", "") + ", kv " + run.value("kv_dtype", "");
  return "";
}

// "compared" or "not compared: WHY" (CutReason) of one call report's numerics; "" when the call
// has none (not run, or not a decode call).
std::string NumericsOutcome(const json& report) {
  const auto n = report.find("numerics");
  if (n == report.end() || !n->is_object()) return "";
  if (n->value("compared", false)) return "compared";
  return "not compared: " + CutReason(n->value("why", std::string("-")));
}
}  // namespace

std::unique_ptr<KutWorker> KutPool::Take() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !idle_.empty() || live_ < o_.workers; });
  if (!idle_.empty()) {
    auto w = std::move(idle_.back());
    idle_.pop_back();
    return w;
  }
  ++live_;
  return nullptr;  // the caller starts a new one
}

void KutPool::Give(std::unique_ptr<KutWorker> w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (w)
    idle_.push_back(std::move(w));
  else
    --live_;
  cv_.notify_one();
}

}  // namespace mlasim::fuzz

namespace mlasim::fuzz {
namespace {

constexpr int kMaxWorkerEndsPerStep = 64;
// Buffers tried one at a time when a device fault is attributed, most likely first.
const char* const kDeviceGuardOrder[] = {"q",
                                         "o",
                                         "lse",
                                         "partial_o",
                                         "partial_lse",
                                         "kv_cache",
                                         "kv_indices",
                                         "topk_indices",
                                         "work_info",
                                         "work_indptr",
                                         "reduce_indptr",
                                         "reduce_final_map",
                                         "reduce_partial_map",
                                         "qo_indptr",
                                         "kv_indptr",
                                         "kv_last_page_lens"};

void AddFindings(const json& list, std::vector<sim::Violation>* out) {
  for (const json& v : list) {
    auto x = ViolationFromJson(v);
    if (x.ok()) out->push_back(std::move(*x));
  }
}

// Tests only (tests/kut/kut_campaign_test.cpp): with MLASIM_KUT_TEST_FAULT_ONCE=PATH, the first
// worker to create PATH fails its next kernel call as a device fault would, once per PATH: the
// fault a worker sees when another MPS client faulted, which does not come back when the call
// runs again.
void InjectFaultOnceForTests() {
  const char* path = std::getenv("MLASIM_KUT_TEST_FAULT_ONCE");
  if (path == nullptr || *path == 0) return;
  const int fd = ::open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return;  // injected already (or cannot say): run normally
  ::close(fd);
  throw std::runtime_error("injected device fault (MLASIM_KUT_TEST_FAULT_ONCE)");
}

}  // namespace

KutPool::RerunEnd KutPool::RerunOn(KutWorker& w, const json& scenario, const json& running,
                                   const std::string& guard_only, json* fault) {
  const int32_t call = running.value("call", 0);
  const std::string op = running.value("op", "");
  const int32_t decode = op == "reduce" ? call - 1 : call;
  json req = {{"scenario", scenario}, {"start_call", decode}, {"end_call", decode + 1}};
  if (!guard_only.empty()) req["guard_only"] = guard_only, req["guard"] = true;
  (void)w.Send(req.dump());  // a worker that died shows as the end of its output below
  std::string line;
  json now;
  while (w.Next(o_.timeout_seconds, &line) == KutWorker::Read::kLine) {
    char tag;
    json j;
    if (!Parse(line, &tag, &j)) continue;
    if (tag == 'P') now = j;
    if (tag == 'E') return RerunEnd::kClean;
    if (tag != 'F') continue;
    *fault = j;
    const bool there =
        now.is_object() && now.value("call", -1) == call && now.value("op", "") == op;
    return there ? RerunEnd::kFaultedThere : RerunEnd::kFaultedElsewhere;
  }
  return RerunEnd::kFaultedElsewhere;  // ended or hung without a step end
}

KutPool::RerunEnd KutPool::RerunAlone(const json& scenario, const json& running,
                                      const std::string& guard_only, json* fault) {
  std::string error;
  std::unique_ptr<KutWorker> w = NewWorker(&error, /*isolated=*/true);
  if (w == nullptr) return RerunEnd::kNoWorker;
  const RerunEnd end = RerunOn(*w, scenario, running, guard_only, fault);
  w->Stop();
  return end;
}

// Runs the call `running` names (a decode, or a reduce with the decode before it) again in
// fresh workers, one buffer guarded at a time, until that same call faults: that buffer is the
// one it ran past. A fault in another call of the rerun (the decode before a reduce, running past
// the one guarded buffer where sentinel mode gave it slack) says nothing about this call's fault
// and moves on to the next buffer.
json KutPool::AttributeDeviceFault(const json& scenario, const json& running, const json& fault) {
  auto attributed = [&](const char* name, const json& rerun_fault) {
    json out = fault;
    out["buffer"] = name;
    out["side"] = "after";
    out["device"] = rerun_fault.value("device", fault.value("device", std::string()));
    return out;
  };
  // Under MPS the pool's workers may hold contexts the fault ended: fresh ones outside it.
  // Otherwise the reruns borrow the pool's workers: a run that does not fault leaves its worker
  // alive for the next buffer, and only a worker that ended is replaced (in the background), so a
  // fault costs one new process, not one per buffer tried.
  std::unique_ptr<KutWorker> w;
  for (const char* name : kDeviceGuardOrder) {
    json rerun_fault = json::object();
    if (mps_) {
      if (RerunAlone(scenario, running, name, &rerun_fault) == RerunEnd::kFaultedThere)
        return attributed(name, rerun_fault);
      continue;
    }
    if (w == nullptr && (w = Take()) == nullptr) {
      std::string error;
      if ((w = NewWorker(&error)) == nullptr) {
        Give(nullptr);
        break;
      }
    }
    const RerunEnd end = RerunOn(*w, scenario, running, name, &rerun_fault);
    if (end == RerunEnd::kClean) continue;
    w->Stop();  // it faulted, hung or ended: its place is refilled
    w.reset();
    ReplaceInBackground();
    if (end == RerunEnd::kFaultedThere) return attributed(name, rerun_fault);
  }
  if (w != nullptr) Give(std::move(w));
  return fault;
}

void KutPool::AddCallReport(const json& j, KutStepResult& res) {
  res.calls.push_back(j.value("report", json::object()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    outcomes_[Outcome(res.calls.back())] += 1;
    if (const std::string n = NumericsOutcome(res.calls.back()); !n.empty()) numerics_[n] += 1;
    if (const std::string f = Formats(res.calls.back()); !f.empty()) formats_[f] += 1;
  }
  AddFindings(j.value("findings", json::array()), &res.findings);
}

void KutPool::AddStepEnd(const json& j, KutStepResult& res) {
  res.device = j.value("device", "");
  res.error = j.value("error", "");
  for (const json& p : j.value("plans", json::array())) res.plans.push_back(p);
  std::vector<sim::Violation> plan_findings;
  AddFindings(j.value("plan_findings", json::array()), &plan_findings);
  res.findings.insert(res.findings.begin(), plan_findings.begin(), plan_findings.end());
  std::lock_guard<std::mutex> lock(mu_);
  const json seconds = j.value("seconds", json::object());
  for (const auto& [k, v] : seconds.items())
    if (v.is_number()) timing_[k] += v.get<double>();
  timing_["steps"] += 1;
}

bool KutPool::RunOnWorker(KutWorker& w, const json& scenario, int32_t start, KutStepResult& res,
                          json& running, json& fault, int32_t& next_start) {
  const json req = {{"scenario", scenario}, {"start_call", start}};
  (void)w.Send(req.dump());  // a worker that died shows as the end of its output below
  std::string line;
  KutWorker::Read r = KutWorker::Read::kLine;
  while ((r = w.Next(o_.timeout_seconds, &line)) == KutWorker::Read::kLine) {
    char tag;
    json j;
    if (!Parse(line, &tag, &j)) {
      w.last_words = line;
      continue;
    }
    if (tag == 'P') running = j;
    if (tag == 'F') fault = j;
    if (tag == 'C') {
      // The call (and its reduce, announced before the decode's report) is done: a fault from
      // here to the next announcement is no call's.
      const int32_t index = j.value("report", json::object()).value("index", -1);
      const int32_t announced = running.is_object() ? running.value("call", -1) : -1;
      next_start = std::max({next_start, index + 1, announced + 1});
      running = json();
      AddCallReport(j, res);
    }
    if (tag == 'E') {
      AddStepEnd(j, res);
      return true;
    }
  }
  if (r == KutWorker::Read::kTimeout) fault = {{"hang", o_.timeout_seconds}};
  return false;
}

int32_t KutPool::AddWorkerEnd(const json& scenario, const json& running, json fault,
                              const std::string& how, const std::string& last_words,
                              KutStepResult& res) {
  if (running.is_null()) {
    res.error = "the worker ended outside a kernel call (" + how + ")" +
                (last_words.empty() ? "" : ": " + last_words);
    return -1;
  }
  const int32_t call = running.value("call", 0);
  if (fault.is_null()) fault = {{"signal", 0}, {"ended", how}};
  if (fault.contains("device") && !fault.contains("buffer")) {
    // A device fault names no buffer. First the call runs once more alone, as the campaign runs
    // it: a fault that does not come back was not this call's (under MPS, a fault of any client
    // ends every client on the GPU) or cannot be reproduced, and is no finding; the step goes on
    // from the call's decode in a new worker. Only a fault that recurs is attributed (reruns
    // with one buffer guarded at a time): attributing first would pin another worker's fault on
    // whatever buffer this call happens to overrun when guarded.
    json again;
    if (RerunAlone(scenario, running, "", &again) == RerunEnd::kClean) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++faults_not_recurring_;
      }
      res.notes.push_back(fmt::format(
          "call {} ({}): the worker ended ({}); the call ran again alone without a fault (not "
          "a finding{})",
          call, running.value("op", ""), how,
          mps_ ? "; under MPS a fault of any worker ends every worker on the GPU" : ""));
      return running.value("op", "") == "reduce" ? call - 1 : call;
    }
    fault = AttributeDeviceFault(scenario, running, fault);
  }
  sim::Violation v = FaultFinding(running, fault, desc_.name);
  res.notes.push_back(fmt::format("call {} ({}): the worker ended ({}); {}", call,
                                  running.value("op", ""), how, v.detail));
  res.calls.push_back({{"index", call},
                       {"step", running.value("step", "")},
                       {"call", running.value("name", "")},
                       {"fault", v.detail}});
  res.findings.push_back(std::move(v));
  return call + 1;
}

KutStepResult KutPool::Check(const sim::Scenario& s) {
  KutStepResult res;
  const json scenario = sim::ScenarioToJson(s);
  int32_t start = 0;
  std::string last_device_error;
  for (int ends = 0; ends < kMaxWorkerEndsPerStep; ++ends) {
    std::unique_ptr<KutWorker> w = Take();
    std::string error;
    if (w == nullptr && (w = NewWorker(&error)) == nullptr) {
      Give(nullptr);
      res.error = "cannot start a worker: " + error;
      return res;
    }
    json running, fault;
    int32_t next_start = start;
    if (RunOnWorker(*w, scenario, start, res, running, fault, next_start)) {
      Give(std::move(w));
      return res;
    }
    // Before the replacement starts, so that it starts outside the daemon already.
    if (fault.contains("device") && mps_ && !left_mps_.exchange(true))
      res.notes.push_back(
          "a device fault under MPS ends every worker on the GPU, and the daemon takes no new "
          "client until they have all exited: the workers started from now on run outside it");
    const std::string how = w->Stop();
    ReplaceInBackground();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++restarts_;
    }
    if (mps_ && running.is_null() && fault.contains("device")) {
      // Under MPS, a device error outside any kernel call (another worker's fault ended this
      // context too): the calls not yet reported run again on a new worker. Bounded with the
      // other worker ends of the step; without MPS such an error is the step's error below.
      last_device_error = fault.value("device", std::string());
      res.notes.push_back("the worker's device failed outside a kernel call (" + how + ": " +
                          last_device_error + "): the step goes on from call " +
                          std::to_string(next_start));
      start = next_start;
      continue;
    }
    start = AddWorkerEnd(scenario, running, std::move(fault), how, w->last_words, res);
    if (start < 0) return res;
  }
  res.error = "too many worker faults in one step" +
              (last_device_error.empty() ? "" : " (the last: " + last_device_error + ")");
  return res;
}

std::string WorkerExe() {
  if (const char* env = std::getenv("MLASIM_EXE"); env != nullptr && *env != '\0') return env;
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("mlasim");
}

Property KutProperty(KutPool* pool, bool ignore_known) {
  return [pool, ignore_known](const sim::ReplayReport& r) {
    KutStepResult res = pool->Check(r.scenario);
    std::vector<sim::Violation> out;
    if (!res.error.empty()) {
      sim::Violation v;
      v.kind = sim::ViolationKind::kKernelFault;
      v.call = "step";
      v.detail = "the step could not be run through the kernel under test: " + res.error;
      out.push_back(v);
    }
    for (sim::Violation& v : res.findings) {
      const bool kernel = v.kind == sim::ViolationKind::kKernelContract ||
                          v.kind == sim::ViolationKind::kKernelNumerics ||
                          v.kind == sim::ViolationKind::kKernelFault;
      if (ignore_known && !kernel && IsKnownFamily(v, r)) continue;
      out.push_back(std::move(v));
    }
    return out;
  };
}

int KutWorkerMain(std::istream& in, int out_fd, const std::string& library,
                  const std::string& config, const KutCheckOptions& check) {
  auto emit = [out_fd](char tag, const json& j) {
    const std::string s = std::string(1, tag) + " " + j.dump() + "\n";
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t w = ::write(out_fd, s.data() + off, s.size() - off);
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
  };
  auto lib = KutLibrary::Open(library, config);
  if (!lib.ok()) {
    emit('X', {{"error", lib.status().message()}});
    return 2;
  }
  RegisterHostFaultHandler(out_fd);
  // A device kernel's worker creates its GPU context now, before it is lent a step (a worker
  // replaced after a fault does this in the background: KutPool::ReplaceInBackground). An error
  // here shows again, with its cause, at the step's first GPU call.
  if (!(*lib)->description().host_memory) {
    try {
      gpu::device_synchronize();
    } catch (const std::exception&) {
    }
  }
  emit('D', (*lib)->description().ToJson());
  auto findings = [](const std::vector<sim::Violation>& v) {
    json a = json::array();
    for (const sim::Violation& x : v) a.push_back(ViolationToJson(x));
    return a;
  };
  std::string line;
  while (std::getline(in, line)) {
    const json req = json::parse(line, nullptr, false);
    auto s = req.is_object() && req.contains("scenario")
                 ? sim::ParseScenario(req["scenario"])
                 : InvalidArgumentError("request", "no scenario");
    if (!s.ok()) {
      emit('E', {{"error", "bad request: " + s.status().ToString()}});
      continue;
    }
    KutCheckOptions o = check;
    o.start_call = req.value("start_call", 0);
    o.end_call = req.value("end_call", -1);
    o.guard_only = req.value("guard_only", "");
    o.guard = req.value("guard", o.guard);
    try {
      const KutStepReport rep = CheckStep(
          **lib, *s, o,
          [&](const json& running) {
            emit('P', running);
            InjectFaultOnceForTests();
          },
          [&](const KutCallReport& k) {
            emit('C', {{"report", k.json}, {"findings", findings(k.findings)}});
          });
      emit('E', {{"device", rep.device},
                 {"seconds", rep.seconds},
                 {"plans", rep.plans},
                 {"plan_findings", findings(rep.plan_findings)},
                 {"error", rep.error}});
    } catch (const std::exception& e) {  // a device fault: the context is lost
      emit('F', {{"device", e.what()}});
      ::_exit(kKutFaultExit);
    }
  }
  return 0;
}

}  // namespace mlasim::fuzz
