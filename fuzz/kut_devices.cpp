#include "fuzz/kut_devices.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "fuzz/progress.h"
#include "kernels/gpu_api.h"
#include "sim/os_error.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

// Starts `argv` with stdout and stderr into `log`, the device it sees set in the environment.
pid_t Start(const std::vector<std::string>& argv, const std::string& device,
            const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ::setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
  ::setenv("HIP_VISIBLE_DEVICES", device.c_str(), 1);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

std::vector<std::string> ProcessArgs(const DeviceCampaignOptions& o, const DeviceProcess& p,
                                     bool resume) {
  std::vector<std::string> a = {o.exe};
  a.insert(a.end(), o.args.begin(), o.args.end());
  a.insert(a.end(),
           {"--device", "0", "--shard", p.shard, "--out", p.dir, "--known-from", o.out_dir});
  if (p.budget >= 0) a.insert(a.end(), {"--cases", std::to_string(p.budget)});
  if (resume) a.push_back("--resume");
  return a;
}

int64_t CommittedCases(const DeviceProcess& p, int32_t shard, int32_t shards) {
  auto prog = ReadProgressFile((fs::path(p.dir) / ProgressFileName(shard, shards)).string(), "");
  return prog.ok() ? prog->next_index : 0;
}

int64_t CountFindings(const std::string& dir) {
  std::error_code ec;
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    n += !name.empty() && name[0] != '.' && e.path().extension() == ".json";
  }
  return n;
}

}  // namespace

StatusOr<std::vector<std::string>> ParseDevices(const std::string& text) {
  std::vector<std::string> out;
  if (text == "all") {
    const int n = gpu::device_count();
    if (n < 1)
      return InvalidArgumentError("--devices", "all: no GPU is visible (list devices, e.g. 0,0)");
    for (int d = 0; d < n; ++d) out.push_back(std::to_string(d));
    return out;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item =
        text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty() || item.size() > 4 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgumentError(
          "--devices", "must be all or a list of device numbers like 0,1 (got '" + text + "')");
    out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (out.size() > 256) return InvalidArgumentError("--devices", "at most 256 processes");
  return out;
}

StatusOr<std::map<std::string, FindingRecord>> MergeLowestSeedIndex(
    const std::vector<std::string>& dirs, const std::string& out_dir) {
  std::map<std::string, FindingRecord> kept;
  auto earlier = ReadFindingDir(out_dir, "--out");
  if (!earlier.ok()) return earlier.status();
  for (FindingRecord& r : *earlier) kept.emplace(r.signature, std::move(r));
  std::map<std::string, FindingRecord> fresh;
  for (const std::string& d : dirs) {
    auto records = ReadFindingDir(d, "--out");
    if (!records.ok()) return records.status();
    for (FindingRecord& r : *records) {
      if (kept.count(r.signature)) continue;
      auto it = fresh.find(r.signature);
      const uint64_t idx = r.seed_index.value_or(~uint64_t{0});
      const bool better =
          it == fresh.end() || idx < it->second.seed_index.value_or(~uint64_t{0}) ||
          (idx == it->second.seed_index.value_or(~uint64_t{0}) && SmallerFinding(r, it->second));
      if (better) fresh[r.signature] = std::move(r);
    }
  }
  for (auto& [sig, r] : fresh) {
    const std::string name = FindingFileName(sig);
    const std::string path = (fs::path(out_dir) / name).string();
    MLASIM_RETURN_IF_ERROR(WriteFileAtomic(
        path, (fs::path(out_dir) / (".tmp-merge-" + name)).string(), r.text, "--out"));
    r.path = path;
    kept.emplace(sig, std::move(r));
  }
  return kept;
}

StatusOr<DeviceCampaignSummary> RunDeviceCampaign(const DeviceCampaignOptions& o,
                                                  const DeviceProgressFn& progress) {
  if (o.devices.empty()) return InvalidArgumentError("--devices", "lists no device");
  MLASIM_RETURN_IF_ERROR(sim::PrepareOutputFolder("--out", o.out_dir, /*create=*/true));
  std::error_code ec;
  const std::string devices_dir = (fs::path(o.out_dir) / ".devices").string();
  fs::create_directories(devices_dir, ec);
  if (ec) return sim::OsError("--out", sim::FileOp::kCreateFolder, devices_dir, ec);
  DeviceCampaignSummary sum;
  auto before = ReadFindingDir(o.out_dir, "--out");
  if (!before.ok()) return before.status();
  for (const FindingRecord& r : *before) sum.earlier.insert(r.signature);
  const int32_t W = static_cast<int32_t>(o.devices.size());
  const int32_t N = o.shards * W;
  std::vector<pid_t> pids(o.devices.size(), -1);
  for (int32_t w = 0; w < W; ++w) {
    DeviceProcess p;
    p.device = o.devices[w];
    const int32_t shard = o.shard + o.shards * w;
    p.shard = fmt::format("{}/{}", shard, N);
    p.dir = (fs::path(o.out_dir) / ".devices" / fmt::format("{}-of-{}", shard, N)).string();
    p.log = p.dir + ".log";
    if (o.max_cases >= 0) p.budget = std::max<int64_t>(0, (o.max_cases - w + W - 1) / W);
    sum.processes.push_back(p);
    if (p.budget == 0) continue;  // fewer cases than processes
    pids[w] = Start(ProcessArgs(o, p, o.resume), p.device, p.log);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int live = W; live > 0;) {
    live = 0;
    for (int32_t w = 0; w < W; ++w) {
      if (pids[w] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[w], &status, WNOHANG) == 0) {
        ++live;
        continue;
      }
      DeviceProcess& p = sum.processes[w];
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pids[w] = -1;
      if (p.exit_code == 0 || p.exit_code == 1 || p.exit_code == 4) continue;
      if (p.exit_code == 2 || p.restarts >= o.max_restarts) {  // bad input will not get better
        p.taken_out = true;
        continue;
      }
      ++p.restarts;
      pids[w] = Start(ProcessArgs(o, p, true), p.device, p.log);
      ++live;
    }
    int64_t cases = 0, found = 0;
    for (int32_t w = 0; w < W; ++w) {
      sum.processes[w].cases = CommittedCases(sum.processes[w], o.shard + o.shards * w, N);
      cases += sum.processes[w].cases;
      found += CountFindings(sum.processes[w].dir);
    }
    if (progress) progress(cases, found, secs());
    if (live > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::vector<std::string> dirs;
  for (DeviceProcess& p : sum.processes) {
    sum.cases += p.cases;
    sum.cut_short = sum.cut_short || (p.budget >= 0 && p.cases < p.budget);
    if (fs::is_directory(p.dir)) dirs.push_back(p.dir);
  }
  sum.seconds = secs();
  MLASIM_ASSIGN_OR_RETURN(sum.findings, MergeLowestSeedIndex(dirs, o.out_dir));
  return sum;
}

}  // namespace mlasim::fuzz
