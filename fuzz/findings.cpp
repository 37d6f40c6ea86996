#include "fuzz/findings.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "fuzz/progress.h"
#include "fuzz/signature.h"
#include "sim/json_input.h"
#include "sim/os_error.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {

namespace fs = std::filesystem;

std::string FindingFileName(const std::string& signature) {
  std::string out;
  for (char c : signature)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '.';
  return out + ".json";
}

namespace {

// Writes all of `text` to `fd` and flushes it to disk: 0, or the errno.
int WriteAllAndSync(int fd, const std::string& text) {
  if (const int err = sim::WriteAll(fd, text); err != 0) return err;
  return ::fsync(fd) == 0 ? 0 : errno;
}

// An unnamed file in `dir` (O_TMPFILE: a kill leaves nothing behind), or -1 where the
// filesystem has none.
int OpenUnnamed(const std::string& dir) {
#ifdef O_TMPFILE
  return ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#else
  (void)dir;
  return -1;
#endif
}

}  // namespace

Status WriteFileAtomic(const std::string& path, const std::string& tmp, const std::string& text,
                       const std::string& field) {
  const std::string dir = fs::path(path).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path).parent_path().string();
  // The bytes go to an unnamed file where the filesystem allows it, so a kill while writing
  // leaves nothing; it gets the name `tmp` only for the instant before the rename.
  int fd = OpenUnnamed(dir);
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return sim::OsError(field, sim::FileOp::kWrite, path, errno);
  int err = WriteAllAndSync(fd, text);
  if (err == 0 && unnamed) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    ::unlink(tmp.c_str());  // a stale one of a killed writer
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
      err = errno;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return sim::OsError(field, sim::FileOp::kWrite, path, err);
  }
  // The rename itself on disk: the folder's entry.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

std::string ShellQuote(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:=,+@%-", c) != nullptr;
  });
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

std::string PathText(const std::vector<int>& path) {
  std::string out = "[";
  for (size_t i = 0; i < path.size(); ++i) out += (i ? "," : "") + std::to_string(path[i]);
  return out + "]";
}

}  // namespace

std::string ReproduceCommand(const Failure& f, const FindingOrigin& origin) {
  std::string cmd = fmt::format("mlasim fuzz --reproduce {} --size {} --shrink-path {}", f.seed,
                                f.size, ShellQuote(PathText(f.shrink_path)));
  if (!origin.profiles_are_default)
    for (const std::string& p : origin.profiles) cmd += " --profile " + ShellQuote(p);
  if (origin.small) cmd += " --small";
  if (!origin.generate.empty()) {
    std::string list;
    for (const std::string& g : origin.generate) list += (list.empty() ? "" : ",") + g;
    cmd += " --generate " + ShellQuote(list);
  }
  for (const std::string& c : origin.contract_files) cmd += " --contract " + ShellQuote(c);
  if (origin.kernel_inputs) cmd += " --gpu " + origin.gpu_mode;
  if (!origin.kernel_flags.empty()) cmd += " " + origin.kernel_flags;
  // Explicit either way: the CLI's default is on, campaigns of older versions generated as off.
  cmd += origin.swarm ? " --swarm on" : " --swarm off";
  return cmd;
}

std::string OriginText(std::optional<uint64_t> seed_index, int steps, bool cut_short, int budget) {
  std::string out = seed_index ? fmt::format("seed index {}", *seed_index) : "seed index unknown";
  out += fmt::format(", {} shrink step{}", steps, steps == 1 ? "" : "s");
  if (cut_short)
    out += budget >= 0 ? fmt::format(", cut short by the {}-step budget", budget)
                       : ", cut short by the shrink step budget";
  return out;
}

std::string ReplayCommand(const std::string& replay_flags, const std::string& path) {
  return "mlasim replay " + (replay_flags.empty() ? "" : replay_flags + " ") + ShellQuote(path);
}

nlohmann::json FindingDocument(const Failure& f, const std::string& signature,
                               const FindingOrigin& origin) {
  const sim::Violation* v = FindSignature(f.broken, signature);
  MLASIM_ASSERT(v != nullptr, "a finding's shrunk case shows its own signature");
  nlohmann::json doc = sim::ScenarioToJson(f.scenario);
  const std::string file = FindingFileName(signature);
  doc["name"] = "finding-" + file.substr(0, file.size() - 5);
  doc["finding"] = {
      {"signature", signature},
      {"seed_index", origin.seed_index},
      {"shrink",
       {{"steps", f.shrink_steps},
        {"max_steps", origin.max_shrink_steps},
        {"cut_short", f.cut_short}}},
      {"violation", ViolationJson(*v)},
      {"reproduce",
       {{"seed", f.seed},
        {"size", f.size},
        {"shrink_path", f.shrink_path},
        {"profiles", origin.profiles},
        {"small", origin.small},
        {"swarm", origin.swarm},
        {"command", ReproduceCommand(f, origin)},
        {"rc_params", fmt::format("seed={} max_success=1 max_size={}", f.seed, f.size)}}}};
  if (origin.shrink != ShrinkPolicy::kPerSignature)
    doc["finding"]["shrink"]["policy"] = ShrinkPolicyName(origin.shrink);
  if (origin.known)
    doc["finding"]["known"] = {
        {"name", origin.known->name},
        {"upstream", origin.known->upstream},
        {"fixed_in", origin.known->fixed_in.empty() ? nlohmann::json()
                                                    : nlohmann::json(origin.known->fixed_in)}};
  if (!origin.replay_flags.empty())
    doc["finding"]["reproduce"]["replay"] = ReplayCommand(origin.replay_flags, file);
  return doc;
}

namespace {

Status BadFinding(const std::string& path, const std::string& why) {
  return InvalidArgumentError(path, "malformed finding file: " + why);
}

// The keys of a finding object and its parts (FindingDocument): any other is refused, so that a
// hand-edited or damaged file is not copied on as a finding.
const std::set<std::string> kFindingKeys = {"signature", "seed_index", "shrink",
                                            "violation", "reproduce",  "known"};
const std::set<std::string> kShrinkKeys = {"steps", "max_steps", "cut_short", "policy"};
const std::set<std::string> kReproduceKeys = {"seed",  "size",    "shrink_path", "profiles",
                                              "small", "swarm",   "command",     "rc_params",
                                              "replay"};
const std::set<std::string> kKnownKeys = {"name", "upstream", "fixed_in"};
const std::set<std::string> kViolationKeys = {"kind",   "class",  "step",          "call",
                                              "buffer", "access", "rows_past_end", "detail"};

// "finding.KEY.k is not a key of a finding file" for the first key of `obj` outside `allowed`.
Status RefuseUnknownKeys(const nlohmann::json& obj, const std::string& where,
                         const std::set<std::string>& allowed, const std::string& path) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!allowed.count(it.key()))
      return BadFinding(path, where + "." + it.key() + ": unknown key");
  return OkStatus();
}

}  // namespace

Status CheckSignature(const std::string& signature, const std::string& field) {
  std::vector<std::string> part;
  for (size_t at = 0;;) {
    const size_t bar = signature.find('|', at);
    part.push_back(signature.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  static const std::set<std::string> kClasses = {"A", "B", "C", "D", "E", "F", "G",
                                                 "H", "I", "J", "KUT-contract",
                                                 "KUT-numerics", "KUT-fault"};
  const std::string shown = "'" + signature.substr(0, 80) + (signature.size() > 80 ? "...'" : "'");
  const std::string form = " is not a signature step|call|buffer|access|class";
  if (part.size() != 5)
    return InvalidArgumentError(field, shown + form + fmt::format(" (5 parts separated by |, got {})",
                                                                  part.size()));
  if (!sim::IsSignatureName(part[0], false) || !sim::IsSignatureName(part[1], false))
    return InvalidArgumentError(field, shown + form + ": step and call are 1..128 of [A-Za-z0-9_-]");
  if (!sim::IsSignatureName(part[2], true))
    return InvalidArgumentError(field, shown + form + ": buffer is 1..128 of [A-Za-z0-9_.-]");
  if (part[3] != "read" && part[3] != "write" && part[3] != "run")
    return InvalidArgumentError(field, shown + form + ": access is read, write or run");
  if (!kClasses.count(part[4]))
    return InvalidArgumentError(field, shown + form + ": class is A..J or KUT-contract, "
                                                      "KUT-numerics, KUT-fault");
  return OkStatus();
}

namespace {

// reproduce: the seed a non-negative integer, size 1..1000 and shrink_path items 0..999999 (what
// `fuzz --reproduce` takes), at most 100000 steps; the flags' types.
Status ReadReproduce(const nlohmann::json& rp, const std::string& path) {
  if (!rp.is_object()) return BadFinding(path, "finding.reproduce must be an object");
  MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(rp, "finding.reproduce", kReproduceKeys, path));
  if (rp.contains("seed") && !rp["seed"].is_number_unsigned() &&
      !(rp["seed"].is_number_integer() && rp["seed"].get<int64_t>() >= 0))
    return BadFinding(path, "finding.reproduce.seed must be an integer in 0..2^64-1");
  if (rp.contains("size"))
    if (std::string why = sim::IntegerRangeReason(rp["size"], 1, 1000); !why.empty())
      return BadFinding(path, "finding.reproduce.size " + why + " (a RapidCheck size)");
  if (rp.contains("shrink_path")) {
    const auto& sp = rp["shrink_path"];
    if (!sp.is_array() || sp.size() > 100000)
      return BadFinding(path, "finding.reproduce.shrink_path must be an array of at most 100000 "
                              "steps");
    for (size_t i = 0; i < sp.size(); ++i)
      if (std::string why = sim::IntegerRangeReason(sp[i], 0, 999999); !why.empty())
        return BadFinding(path, fmt::format("finding.reproduce.shrink_path[{}] {}", i, why));
  }
  for (const char* k : {"small", "swarm"})
    if (rp.contains(k) && !rp[k].is_boolean())
      return BadFinding(path, fmt::format("finding.reproduce.{} must be true or false", k));
  for (const char* k : {"command", "rc_params", "replay"})
    if (rp.contains(k) && !rp[k].is_string())
      return BadFinding(path, fmt::format("finding.reproduce.{} must be a string", k));
  if (rp.contains("profiles")) {
    if (!rp["profiles"].is_array())
      return BadFinding(path, "finding.reproduce.profiles must be an array of names");
    for (const auto& x : rp["profiles"])
      if (!x.is_string()) return BadFinding(path, "finding.reproduce.profiles must be an array of names");
  }
  return OkStatus();
}

// The keys of finding and of its objects; violation's step, call, buffer, access and class are
// the signature's.
Status CheckFindingShape(const nlohmann::json& fd, const std::string& signature,
                         const std::string& path) {
  MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(fd, "finding", kFindingKeys, path));
  if (fd.contains("shrink") && fd["shrink"].is_object())
    MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(fd["shrink"], "finding.shrink", kShrinkKeys, path));
  if (fd.contains("reproduce")) MLASIM_RETURN_IF_ERROR(ReadReproduce(fd["reproduce"], path));
  if (fd.contains("known")) {
    if (!fd["known"].is_object()) return BadFinding(path, "finding.known must be an object");
    MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(fd["known"], "finding.known", kKnownKeys, path));
  }
  if (fd.contains("violation")) {
    const auto& v = fd["violation"];
    if (!v.is_object()) return BadFinding(path, "finding.violation must be an object");
    MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(v, "finding.violation", kViolationKeys, path));
    // The signature's parts, in its order.
    const char* keys[] = {"step", "call", "buffer", "access", "class"};
    size_t at = 0;
    for (const char* k : keys) {
      const size_t bar = signature.find('|', at);
      const std::string want = signature.substr(at, bar == std::string::npos ? bar : bar - at);
      at = bar + 1;
      if (v.contains(k) && v[k] != want)
        return BadFinding(path, fmt::format("finding.violation.{} {} is not the signature's {} "
                                            "'{}'",
                                            k, v[k].dump().substr(0, 80), k, want));
    }
  }
  return OkStatus();
}

// The optional parts of `finding` (absent in files of older campaigns), type-checked.
Status ReadFindingDetails(const nlohmann::json& fd, const std::string& path, FindingRecord* r) {
  if (fd.contains("seed_index")) {
    if (!fd["seed_index"].is_number_unsigned() &&
        !(fd["seed_index"].is_number_integer() && fd["seed_index"].get<int64_t>() >= 0))
      return BadFinding(path,
                        sim::IsIntegerBeyond64Bits(fd["seed_index"])
                            ? "finding.seed_index " + sim::NotAnIntegerReason(fd["seed_index"])
                            : "finding.seed_index must be a non-negative integer");
    r->seed_index = fd["seed_index"].get<uint64_t>();
  }
  if (fd.contains("shrink")) {
    const auto& s = fd["shrink"];
    if (!s.is_object() || !sim::IsInt64(s.value("steps", nlohmann::json())) ||
        !s.value("cut_short", nlohmann::json()).is_boolean())
      return BadFinding(
          path, s.is_object() && sim::IsIntegerBeyond64Bits(s.value("steps", nlohmann::json()))
                    ? "finding.shrink.steps " + sim::NotAnIntegerReason(s["steps"])
                    : "finding.shrink must hold integer steps and boolean cut_short");
    r->shrink_steps = static_cast<int>(std::clamp<int64_t>(s["steps"].get<int64_t>(), 0, 1 << 30));
    r->cut_short = s["cut_short"].get<bool>();
    if (s.contains("max_steps")) {  // a wrong type was dropped without a word
      if (std::string why = sim::IntegerRangeReason(s["max_steps"], INT64_MIN, INT64_MAX);
          !why.empty())
        return BadFinding(path, "finding.shrink.max_steps " + why);
      r->max_shrink_steps =
          static_cast<int>(std::clamp<int64_t>(s["max_steps"].get<int64_t>(), 0, 1 << 30));
    }
  }
  if (fd.contains("violation") && fd["violation"].is_object() &&
      fd["violation"].value("detail", nlohmann::json()).is_string())
    r->detail = fd["violation"]["detail"].get<std::string>();
  if (fd.contains("reproduce") && fd["reproduce"].is_object() &&
      fd["reproduce"].value("command", nlohmann::json()).is_string())
    r->command = fd["reproduce"]["command"].get<std::string>();
  if (fd.contains("known") && fd["known"].is_object() &&
      fd["known"].value("name", nlohmann::json()).is_string())
    r->known_name = fd["known"]["name"].get<std::string>();
  // reproduce.replay is "mlasim replay FLAGS FILE"; FILE (a FindingFileName) has no space.
  const std::string lead = "mlasim replay ";
  if (fd.contains("reproduce") && fd["reproduce"].is_object() &&
      fd["reproduce"].value("replay", nlohmann::json()).is_string()) {
    const std::string replay = fd["reproduce"]["replay"].get<std::string>();
    const size_t last = replay.rfind(' ');
    if (replay.rfind(lead, 0) == 0 && last != std::string::npos && last >= lead.size())
      r->replay_flags = replay.substr(lead.size(), last - lead.size());
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::optional<FindingRecord>> ReadFindingFile(const std::string& path) {
  auto text = sim::ReadTextFile(path, path);
  if (!text.ok()) return text.status();
  return ParseFindingText(std::move(*text), path);
}

StatusOr<std::optional<FindingRecord>> ParseFindingText(std::string text, const std::string& path) {
  auto doc = sim::ParseJsonStrict(text, path);
  if (!doc.ok()) return BadFinding(path, doc.status().message());
  if (!doc->is_object() || !doc->contains("finding")) return std::optional<FindingRecord>();
  const nlohmann::json& fd = (*doc)["finding"];
  if (!fd.is_object() || !fd.contains("signature") || !fd["signature"].is_string() ||
      fd["signature"].get<std::string>().empty())
    return BadFinding(path, "finding.signature must be a non-empty string");
  FindingRecord r;
  r.path = path;
  r.text = std::move(text);
  r.signature = fd["signature"].get<std::string>();
  if (Status st = CheckSignature(r.signature, path); !st.ok())
    return BadFinding(path, "finding.signature: " + st.message());
  MLASIM_RETURN_IF_ERROR(CheckFindingShape(fd, r.signature, path));
  MLASIM_RETURN_IF_ERROR(ReadFindingDetails(fd, path, &r));
  // The finding is a scenario: parsed as `mlasim replay` parses it, so that a file merge or
  // --resume accepts is one replay accepts ("f/x.json: $.model.heads: ...").
  nlohmann::json scenario = *doc;
  scenario.erase("finding");
  if (StatusOr<sim::Scenario> parsed = sim::ParseScenario(scenario); !parsed.ok()) {
    const Status& st = parsed.status();
    return Status(st.code(), path + ": " + (st.field().empty() ? "$" : st.field()), st.message());
  }
  scenario.erase("name");
  r.scenario = scenario.dump();
  return std::optional<FindingRecord>(std::move(r));
}

StatusOr<std::vector<FindingRecord>> ReadFindingDir(const std::string& dir,
                                                    const std::string& field,
                                                    std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {  // missing, a file, a component that is a file
    const int err = fs::exists(dir, ec) ? ENOTDIR : ENOENT;
    return sim::OsError(field, sim::FileOp::kListFolder, dir, err);
  }
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.empty() || n[0] == '.' || it->path().extension() != ".json") continue;
    paths.push_back(it->path());
  }
  if (ec) return sim::OsError(field, sim::FileOp::kListFolder, dir, ec);
  std::sort(paths.begin(), paths.end());
  std::vector<FindingRecord> out;
  for (const fs::path& p : paths) {
    auto r = ReadFindingFile(p.string());
    if (!r.ok()) return r.status();
    // A finding file is named after its signature (FindingFileName): merge writes it under that
    // name, and two files of one signature in one folder are one finding twice.
    if (*r && FindingFileName((**r).signature) != p.filename().string())
      return BadFinding(p.string(), "finding.signature '" + (**r).signature.substr(0, 80) +
                                        "' is not the file's: its file is " +
                                        FindingFileName((**r).signature));
    if (*r) {
      out.push_back(std::move(**r));
    } else if (skipped) {
      skipped->push_back(p.string());
    }
  }
  return out;
}

bool SmallerFinding(const FindingRecord& a, const FindingRecord& b) {
  if (a.scenario.size() != b.scenario.size()) return a.scenario.size() < b.scenario.size();
  if (a.scenario != b.scenario) return a.scenario < b.scenario;
  return a.text < b.text;
}

namespace {

// The progress files of `dir` into `shards` (one entry per campaign shard identity); `found`
// counts them.
Status CollectShards(const std::string& dir, std::map<std::string, ShardRecord>* shards,
                     int* found) {
  std::error_code ec;
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind(".progress-", 0) == 0 && n.find(".tmp") == std::string::npos)
      paths.push_back(it->path());
  }
  if (ec) return sim::OsError("DIR", sim::FileOp::kListFolder, dir, ec);
  std::sort(paths.begin(), paths.end());
  *found = static_cast<int>(paths.size());
  for (const fs::path& p : paths) {
    auto prog = ReadProgressFile(p.string(), p.string());
    if (!prog.ok()) return prog.status();
    ShardRecord s;
    s.path = p.string();
    s.identity = IdentityJson(prog->identity).dump();
    s.seed = prog->identity.seed;
    s.shard = prog->identity.shard;
    s.shards = prog->identity.shards;
    s.profiles = prog->identity.profiles;
    s.small = prog->identity.small;
    s.ignore_known = prog->identity.ignore_known;
    s.cases = prog->next_index;
    auto [it, fresh] = shards->emplace(s.identity, s);
    if (fresh) continue;
    ++it->second.copies;
    if (s.cases > it->second.cases || (s.cases == it->second.cases && s.path < it->second.path)) {
      s.copies = it->second.copies;
      it->second = s;
    }
  }
  return OkStatus();
}

// A folder given to merge that holds neither a progress file nor a finding: not a shard's
// output (a mistyped folder, a shard that never started); merging it would report nothing.
Status NoShardOutput(const std::string& dir, size_t json_without_finding) {
  const std::string others =
      json_without_finding == 0
          ? ""
          : fmt::format("; its {} .json file(s) hold no finding", json_without_finding);
  return InvalidArgumentError(
      "DIR", fmt::format("{} holds no shard output: no progress file (.progress-I-of-N) and no "
                         "finding file (*.json with a finding){}; name the --out folder of a "
                         "fuzz campaign",
                         dir, others));
}

// The shards of one campaign (its identity but the shard) are of one split: shard I of N covers
// the seed indices i with i % N == I, so shards of two splits (0/1 and 1/2) cover the same cases
// and their counts would add them twice. Errors (field "DIR"): two progress files of one
// campaign with another N, both named.
Status CheckOneSplit(const std::map<std::string, ShardRecord>& shards) {
  std::map<std::string, const ShardRecord*> split_of;  // campaign (identity without shard) -> one
  for (const auto& [id, s] : shards) {
    nlohmann::json campaign = nlohmann::json::parse(s.identity);
    campaign.erase("shard");
    campaign.erase("shards");
    auto [it, fresh] = split_of.emplace(campaign.dump(), &s);
    if (fresh || it->second->shards == s.shards) continue;
    const ShardRecord& a = *it->second;
    return InvalidArgumentError(
        "DIR", fmt::format("{} (shard {}/{}) and {} (shard {}/{}) are shards of one campaign "
                           "split two ways: their cases overlap and would be counted twice; "
                           "merge the shards of one --shard I/N split",
                           a.path, a.shard, a.shards, s.path, s.shard, s.shards));
  }
  return OkStatus();
}

}  // namespace

int RemoveTempFiles(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) stale.push_back(it->path());
  int removed = 0;
  for (const fs::path& p : stale) removed += fs::remove(p, ec) ? 1 : 0;
  return removed;
}

StatusOr<MergeResult> MergeFindingDirs(const std::vector<std::string>& dirs,
                                       const std::string& out_dir) {
  MergeResult m;
  // Each folder once (by its canonical path), in a fixed order; OUT's own findings take part.
  std::map<std::string, std::string> sources;
  std::error_code ec;
  auto add = [&sources, &ec](const std::string& d) {
    const fs::path canonical = fs::weakly_canonical(d, ec);
    sources.emplace(ec ? d : canonical.string(), d);
  };
  for (const std::string& d : dirs) add(d);
  const std::map<std::string, std::string> given = sources;  // OUT alone may hold nothing yet
  if (!out_dir.empty() && fs::is_directory(out_dir, ec)) add(out_dir);
  std::map<std::string, ShardRecord> shards;
  for (const auto& [key, dir] : sources) {
    const size_t skipped_before = m.skipped.size();
    auto records = ReadFindingDir(dir, "DIR", &m.skipped);
    if (!records.ok()) return records.status();
    int progress_files = 0;
    MLASIM_RETURN_IF_ERROR(CollectShards(dir, &shards, &progress_files));
    if (records->empty() && progress_files == 0 && given.count(key) > 0)
      return NoShardOutput(dir, m.skipped.size() - skipped_before);
    for (FindingRecord& r : *records) {
      ++m.folders_with[r.signature];
      auto it = m.findings.find(r.signature);
      if (it == m.findings.end()) {
        m.findings.emplace(r.signature, std::move(r));
      } else if (SmallerFinding(r, it->second)) {
        it->second = std::move(r);
      }
    }
  }
  MLASIM_RETURN_IF_ERROR(CheckOneSplit(shards));
  for (auto& [id, s] : shards) {
    m.cases += s.cases;
    m.shards.push_back(std::move(s));
  }
  if (out_dir.empty()) return m;
  MLASIM_RETURN_IF_ERROR(sim::PrepareOutputFolder("--out", out_dir, /*create=*/true));
  RemoveTempFiles(out_dir, ".tmp-merge-");  // left by a merge killed mid-write
  for (const auto& [sig, r] : m.findings) {
    const fs::path target = fs::path(out_dir) / FindingFileName(sig);
    auto existing = sim::ReadTextFile(target.string(), "--out");
    if (existing.ok() && *existing == r.text) continue;
    const fs::path tmp = fs::path(out_dir) / (".tmp-merge-" + FindingFileName(sig));
    MLASIM_RETURN_IF_ERROR(WriteFileAtomic(target.string(), tmp.string(), r.text, "--out"));
    m.written.push_back(target.string());
  }
  return m;
}

}  // namespace mlasim::fuzz
