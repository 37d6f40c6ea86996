// File: tools/mlasim/cmd_triage.cpp — `mlasim triage`: what a fault report gives, swept over what
// it does not (fuzz/triage.h). docs/cli.md ("mlasim triage").
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/signature.h"
#include "fuzz/triage.h"
#include "sim/call_table.h"
#include "sim/fault.h"
#include "sim/os_error.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"

namespace mlasim::cli {
namespace {

using nlohmann::json;
constexpr const char* kName = "triage";

std::vector<std::string> SplitList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t at = 0;
    for (;;) {
      const size_t comma = item.find(',', at);
      out.push_back(item.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return out;
}

const char* AllocatorName(sim::AllocatorModel m) {
  return m == sim::AllocatorModel::kExact ? "exact" : "caching";
}

std::string Percent(int64_t n, int64_t d) {
  return d == 0 ? std::string("-") : fmt::format("{:.1f}%", 100.0 * n / d);
}

// Triage sweeps ATOM's versions (aiter's planner and kernels): the profiles of the atom call
// table, not the vLLM / SGLang ones (docs/engines.md), which pass --profile explicitly.
std::vector<std::string> AtomProfiles() {
  std::vector<std::string> out;
  for (const sim::EngineProfile& e : sim::BuiltinProfiles())
    if (e.table == "atom") out.push_back(e.name);
  return out;
}

// The engine presets whose date (atom-YYYY-MM) lies in FROM..TO (either side may be empty).
StatusOr<std::vector<std::string>> ProfilesInRange(const std::string& range) {
  const size_t dots = range.find("..");
  if (dots == std::string::npos)
    return InvalidArgumentError("--versions", "must be FROM..TO (YYYY-MM, either may be empty)");
  const std::string from = range.substr(0, dots), to = range.substr(dots + 2);
  for (const std::string& d : {from, to})
    if (!d.empty() &&
        (d.size() != 7 || d[4] != '-' || d.find_first_not_of("0123456789-") != std::string::npos))
      return InvalidArgumentError("--versions", "'" + d + "' is not a YYYY-MM date");
  std::vector<std::string> out;
  for (const std::string& p : AtomProfiles()) {
    const std::string date = p.substr(p.find('-') + 1);
    if ((from.empty() || date >= from) && (to.empty() || date <= to)) out.push_back(p);
  }
  if (out.empty()) return InvalidArgumentError("--versions", "no engine profile lies in " + range);
  return out;
}

class TriageCommand final : public Command {
 public:
  explicit TriageCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(
        kName,
        "From what a fault report gives (model, TP/DP, MTP K, batch and graph size, target, "
        "engine version), sweep what it does not (batch contents, rejected drafts, kernel "
        "variant, allocator layout): the share of cases that overrun, fault or corrupt, and the "
        "known bug family that explains them");
    app_->footer(
        "Exit codes: 0 no case overruns, faults or corrupts; 1 some do; 2 bad input (the "
        "message names the flag).\n"
        "Example: mlasim triage --model glm-5.2 --tp 8 --mtp-k 3 --batch 61 --graph 64 "
        "--target gfx950 --profile atom-2026-08 --out triage/\n");
    app_->add_option("--model", model_,
                     "the report's model (glm-5.2, deepseek-v3.2, "
                     "deepseek-v3, kimi-k2)")
        ->required();
    app_->add_option("--heads", heads_,
                     "q heads of the model (all ranks), instead of the "
                     "model's");
    app_->add_option("--tp", tp_, "tensor parallel size")->capture_default_str();
    app_->add_option("--dp", dp_, "data parallel size (every rank like this one)")
        ->capture_default_str();
    app_->add_option("--mtp-k", mtp_k_, "MTP draft tokens K (0..7)")->capture_default_str();
    app_->add_option("--batch", batch_, "requests on the faulting rank")->required();
    app_->add_option("--graph", graph_,
                     "the CUDA/HIP graph batch size the step was padded to "
                     "(default: the engine's capture list)");
    app_->add_flag("--eager", eager_, "the step ran eagerly (no graph padding)");
    app_->add_option("--target", target_, "gfx942, gfx950 or sm90")->capture_default_str();
    app_->add_option("--revision", revision_, "aiter revision 2026-03 or 2026-08")
        ->capture_default_str();
    app_->add_option("--profile", profiles_,
                     "engine profile(s), comma-separated or repeated (default: ATOM's presets " +
                         fmt::format("{}", fmt::join(AtomProfiles(), ", ")) +
                         "; the vLLM / SGLang ones only when named)")
        ->type_name("LIST");
    app_->add_option("--versions", versions_,
                     "the engine version range as dates: the presets in FROM..TO (YYYY-MM)")
        ->type_name("FROM..TO");
    app_->add_option("--kernel", kernels_, "decode kernel variants to sweep (default asm,opus,hk)")
        ->type_name("LIST");
    app_->add_option("--allocator", allocators_,
                     "allocator models to sweep (default exact,caching)")
        ->type_name("LIST");
    app_->add_option("--fault-address", fault_text_,
                     "the report's fault address (0x...): its offset in a page is compared with "
                     "each faulting case's first faulting byte");
    app_->add_option("--cases", o_.cases, "cases in all, spread over the combinations")
        ->capture_default_str();
    app_->add_option("--seed", seed_text_, "seed: number, 0x-hex or a 40-hex commit")
        ->capture_default_str();
    app_->add_option("--jobs", o_.jobs, "worker threads (the result does not depend on it)")
        ->capture_default_str();
    app_->add_option("--shrink-steps", o_.shrink_steps,
                     "accepted shrink steps per family's example (0..1000)")
        ->capture_default_str();
    app_->add_option("--out", out_dir_, "write each family's example case into DIR")
        ->type_name("DIR");
    app_->add_flag("--json", json_, "print the result as JSON");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (Status st = BuildOptions(); !st.ok()) return Fail(io, st);
    if (!out_dir_.empty())  // created; a folder that takes no files is refused before the sweep
      if (Status st = sim::PrepareOutputFolder("--out", out_dir_, /*create=*/true); !st.ok())
        return Fail(io, st);
    StatusOr<fuzz::TriageResult> r = fuzz::RunTriage(o_);
    if (!r.ok()) return Fail(io, r.status());
    // A sweep in which no case ran has nothing to report: say why instead of "none".
    if (r->not_run.Total() == r->cases && r->cases > 0)
      return Fail(io, NothingRan(r->not_run, r->cases));
    if (!out_dir_.empty())
      for (const fuzz::TriageFamily& f : r->families) {
        if (!f.example) continue;
        const std::string path = (std::filesystem::path(out_dir_) / f.example_file).string();
        if (Status st = WriteOutputFile("--out", path,
                                        sim::ScenarioToJson(f.example->scenario).dump(2) + "\n");
            !st.ok())
          return Fail(io, st);
      }
    if (json_)
      io.out << ResultJson(*r).dump(2) << '\n';
    else
      io.out << ResultText(*r);
    for (const fuzz::TriageCombo& c : r->combos)
      if (c.overrun || c.fault || c.corrupt) return kExitCheckFailed;
    return kExitOk;
  }

 private:
  Status BuildModel() {
    const fuzz::TriageModel* m = nullptr;
    std::string known;
    for (const fuzz::TriageModel& x : fuzz::TriageModels()) {
      if (model_ == x.name) m = &x;
      known += (known.empty() ? "" : ", ") + std::string(x.name);
    }
    if (!m)
      return InvalidArgumentError("--model", "unknown model '" + model_ + "' (" + known + ")");
    sim::Scenario& s = o_.base;
    s.model.name = m->name;
    s.model.heads = heads_ > 0 ? heads_ : m->heads;
    s.model.sparse = m->sparse;
    if (m->sparse) s.model.topk = m->topk;
    s.model.kv_dtype = m->kv_dtype;
    if (app_->count("--heads") && (heads_ < 1 || heads_ > 1024))
      return InvalidArgumentError("--heads", "must be 1..1024");
    if (tp_ < 1 || tp_ > 64) return InvalidArgumentError("--tp", "must be 1..64");
    if (s.model.heads % tp_ != 0)
      return InvalidArgumentError(
          "--tp", fmt::format("{} does not divide the model's {} heads", tp_, s.model.heads));
    if (dp_ < 1 || dp_ > 64) return InvalidArgumentError("--dp", "must be 1..64");
    if (mtp_k_ < 0 || mtp_k_ > 7) return InvalidArgumentError("--mtp-k", "must be 0..7");
    s.parallel.tp = tp_;
    s.parallel.dp = dp_;
    s.mtp_k = mtp_k_;
    return OkStatus();
  }

  Status BuildStep() {
    sim::Scenario& s = o_.base;
    if (batch_ < 1 || batch_ > 4096) return InvalidArgumentError("--batch", "must be 1..4096");
    o_.batch = batch_;
    const int32_t q = mtp_k_ + 1;
    if (app_->count("--graph")) {
      if (eager_) return InvalidArgumentError("--graph", "not with --eager");
      if (graph_ < batch_ || graph_ > 4096)
        return InvalidArgumentError("--graph", fmt::format("must be {}..4096 (at least --batch: "
                                                           "the batch is padded up to it)",
                                                           batch_));
      s.graph.capture_sizes = {static_cast<int32_t>(graph_)};  // checked: batch..4096
    }
    s.graph.eager = eager_;
    const int32_t rows = std::max(batch_, app_->count("--graph") ? graph_ : 0);
    s.graph.max_num_seqs = std::max(512, rows);
    s.graph.max_num_batched_tokens = std::max(16384, rows * q);
    StatusOr<ref::Arch> a = ref::ParseArch(target_, "--target");
    if (!a.ok()) return a.status();
    s.target = *a;
    StatusOr<ref::Revision> rv = ref::ParseRevision(revision_, "--revision");
    if (!rv.ok()) return rv.status();
    s.revision = *rv;
    return OkStatus();
  }

  Status BuildSweep() {
    if (!profiles_.empty() && !versions_.empty())
      return InvalidArgumentError("--versions", "not with --profile");
    if (!versions_.empty()) {
      StatusOr<std::vector<std::string>> p = ProfilesInRange(versions_);
      if (!p.ok()) return p.status();
      o_.profiles = *p;
    } else {
      o_.profiles = profiles_.empty() ? AtomProfiles() : SplitList(profiles_);
    }
    o_.kernels =
        kernels_.empty() ? std::vector<std::string>{"asm", "opus", "hk"} : SplitList(kernels_);
    for (const std::string& a : allocators_.empty() ? std::vector<std::string>{"exact", "caching"}
                                                    : SplitList(allocators_)) {
      if (a != "exact" && a != "caching")
        return InvalidArgumentError("--allocator", "unknown model '" + a + "' (exact, caching)");
      o_.allocators.push_back(a == "exact" ? sim::AllocatorModel::kExact
                                           : sim::AllocatorModel::kCaching);
    }
    StatusOr<uint64_t> seed = fuzz::ParseSeed(seed_text_);
    if (!seed.ok()) return InvalidArgumentError("--seed", seed.status().message());
    o_.seed = *seed;
    if (!fault_text_.empty()) {
      MLASIM_ASSIGN_OR_RETURN(o_.fault_address,
                              sim::ParseAddressText(fault_text_, "--fault-address"));
    }
    return fuzz::ValidateTriage(o_);
  }

  Status BuildOptions() {
    MLASIM_RETURN_IF_ERROR(BuildModel());
    MLASIM_RETURN_IF_ERROR(BuildStep());
    return BuildSweep();
  }

  // Exit 2 for a sweep of which no case ran, naming the first case's error (a lowered --limit,
  // or a model every generated shape of which aiter refuses).
  static Status NothingRan(const fuzz::NotRun& n, int64_t cases) {
    const bool limit = n.over_limit > 0;
    return Status(
        limit ? StatusCode::kResourceExhausted : StatusCode::kInvalidArgument, "--cases",
        fmt::format("none of the {} cases ran: {}", cases, fuzz::NotRunReasons(n, "case")));
  }

  std::string Header() const {
    const sim::Scenario& s = o_.base;
    const std::string graph = s.graph.eager ? "eager"
                              : app_->count("--graph")
                                  ? fmt::format("padded to {}", s.graph.capture_sizes[0])
                                  : "the engine's capture list";
    return fmt::format(
        "triage: {} ({} heads, {}, KV {}), TP {}, DP {}, MTP K {}, batch {} ({}), {} aiter {}; "
        "{} cases, seed {}\n"
        "swept: batch contents (context lengths, rejected drafts{}), kernel variant, allocator "
        "(model, page size{})\n",
        s.model.name, s.model.heads,
        s.model.sparse ? fmt::format("sparse top-k {}", s.model.topk) : std::string("dense"),
        ref::DTypeName(s.model.kv_dtype), s.parallel.tp, s.parallel.dp, s.mtp_k, o_.batch, graph,
        ref::ArchName(s.target), ref::RevisionName(s.revision), o_.cases, seed_text_,
        s.model.sparse ? ", top-k counts" : "", ", live tensors before each call");
  }

  std::string ResultText(const fuzz::TriageResult& r) const {
    std::string s = Header() + "\n";
    // The profile column fits the longest name and a space (vllm-flashmla-2025-07 ran into the
    // kernel column at the fixed width of 14).
    size_t profile_width = 14;
    for (const fuzz::TriageCombo& c : r.combos)
      profile_width = std::max(profile_width, c.profile.size() + 1);
    s += fmt::format("{:<{}}{:<7}{:<10}{:>6}{:>5}{:>9}{:>9}{:>9}{:>9}\n", "profile", profile_width,
                     "kernel", "allocator", "cases", "ran", "overrun", "fault", "corrupt",
                     "refused");
    for (const fuzz::TriageCombo& c : r.combos)
      s += fmt::format("{:<{}}{:<7}{:<10}{:>6}{:>5}{:>9}{:>9}{:>9}{:>9}\n", c.profile,
                       profile_width, c.kernel, AllocatorName(c.allocator), c.cases, c.replayed,
                       Percent(c.overrun, c.replayed), Percent(c.fault, c.replayed),
                       Percent(c.corrupt, c.replayed), Percent(c.refused, c.replayed));
    if (const std::string n = fuzz::NotRunText(r.not_run, r.cases, "case"); !n.empty())
      s += n + " (the table's percentages are of the cases that ran)\n";
    s += "\nfamilies:\n";
    if (r.families.empty())
      s += r.not_run.Total() == 0
               ? "  none: no case overruns, faults, corrupts or is refused\n"
               : fmt::format(
                     "  none in the {} case{} that ran: none overruns, faults, corrupts "
                     "or is refused\n",
                     r.cases - r.not_run.Total(), r.cases - r.not_run.Total() == 1 ? "" : "s");
    for (const fuzz::TriageFamily& f : r.families) s += FamilyText(r, f);
    if (o_.fault_address)
      s += fmt::format(
          "\nfault address {:#x}: {} of {} faulting cases fault at the same offset in a page\n",
          *o_.fault_address, r.fault_offset_matches, r.faulting_cases);
    if (o_.fault_address && r.faulting_cases > 0 && r.fault_address_page_aligned)
      s += "  the address starts a page: every overrun past a buffer that ends on a page boundary "
           "faults there (all of the exact allocator's buffers do), so this match does not tell "
           "families apart; the caching allocator's offsets do\n";
    return s;
  }

  std::string FamilyText(const fuzz::TriageResult& r, const fuzz::TriageFamily& f) const {
    std::string s =
        f.known ? fmt::format("  {} ({}), {}: {} of {} cases\n", f.name, f.known->upstream,
                              f.known->fixed_in.empty() ? std::string("open: no profile fixes it")
                                                        : "fixed in " + f.known->fixed_in,
                              f.cases, r.cases)
                : fmt::format("  unknown {}: {} of {} cases\n", f.signature, f.cases, r.cases);
    // Per profile: the cases of its combinations.
    std::vector<std::string> per;
    for (const std::string& p : o_.profiles) {
      int64_t n = 0, d = 0;
      for (size_t c = 0; c < r.combos.size(); ++c)
        if (r.combos[c].profile == p) n += f.combo_cases[c], d += r.combos[c].cases;
      per.push_back(fmt::format("{} {}", p, Percent(n, d)));
    }
    s += "    share per profile: " + fmt::format("{}", fmt::join(per, ", ")) + "\n";
    if (f.example) {
      const sim::Violation* v = fuzz::FindSignature(f.example->broken, f.first_signature);
      s += fmt::format("    example: case {} shrunk {} step{}{}: {}{}\n", f.first_case,
                       f.example->shrink_steps, f.example->shrink_steps == 1 ? "" : "s",
                       out_dir_.empty()
                           ? ""
                           : " -> " + (std::filesystem::path(out_dir_) / f.example_file).string(),
                       v ? v->step + " " + v->call + " " + v->detail : f.first_signature,
                       v ? " (" + sim::ConsequenceText(*v) + ")" : "");
    }
    return s;
  }

  json ResultJson(const fuzz::TriageResult& r) const {
    const sim::Scenario& s = o_.base;
    json report = {{"model", s.model.name},
                   {"heads", s.model.heads},
                   {"sparse", s.model.sparse},
                   {"tp", s.parallel.tp},
                   {"dp", s.parallel.dp},
                   {"mtp_k", s.mtp_k},
                   {"batch", o_.batch},
                   {"graph", s.graph.eager            ? json("eager")
                             : app_->count("--graph") ? json(s.graph.capture_sizes[0])
                                                      : json(nullptr)},
                   {"target", ref::ArchName(s.target)},
                   {"revision", ref::RevisionName(s.revision)},
                   {"profiles", o_.profiles}};
    json combos = json::array();
    for (const fuzz::TriageCombo& c : r.combos)
      combos.push_back({{"profile", c.profile},
                        {"kernel", c.kernel},
                        {"allocator", AllocatorName(c.allocator)},
                        {"cases", c.cases},
                        {"replayed", c.replayed},
                        {"overrun", c.overrun},
                        {"fault", c.fault},
                        {"corrupt", c.corrupt},
                        {"refused", c.refused},
                        {"over_limit", c.over_limit}});
    json families = json::array();
    for (const fuzz::TriageFamily& f : r.families) {
      json j = {{"name", f.name},
                {"signature", f.first_signature},
                {"upstream", f.known ? json(f.known->upstream) : json(nullptr)},
                {"fixed_in",
                 f.known && !f.known->fixed_in.empty() ? json(f.known->fixed_in) : json(nullptr)},
                {"cases", f.cases},
                {"combo_cases", f.combo_cases},
                {"first_case", f.first_case},
                {"example", nullptr}};
      if (f.example)
        j["example"] = {{"file", f.example_file},
                        {"seed", f.example->seed},
                        {"shrink_steps", f.example->shrink_steps},
                        {"shrink_path", f.example->shrink_path},
                        {"scenario", sim::ScenarioToJson(f.example->scenario)}};
      families.push_back(j);
    }
    json out = {{"report", report}, {"cases", r.cases},     {"seed", o_.seed},
                {"combos", combos}, {"families", families}, {"fault_address", nullptr}};
    out["not_run"] = {
        {"over_limit", r.not_run.over_limit},
        {"refused", r.not_run.refused},
        {"first_over_limit", r.not_run.over_limit ? json(r.not_run.first_over_limit) : json()},
        {"first_refused", r.not_run.refused ? json(r.not_run.first_refused) : json()}};
    if (o_.fault_address)
      out["fault_address"] = {{"address", fmt::format("{:#x}", *o_.fault_address)},
                              {"faulting_cases", r.faulting_cases},
                              {"same_page_offset", r.fault_offset_matches},
                              {"page_aligned", r.faulting_cases > 0 && r.fault_address_page_aligned}};
    return out;
  }

  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  fuzz::TriageOptions o_;
  std::string model_, target_ = "gfx942", revision_ = "2026-08", versions_, fault_text_, out_dir_;
  std::string seed_text_ = "1";
  std::vector<std::string> profiles_, kernels_, allocators_;
  // 64 bits, as every integer flag: 2^31 reaches the range checks (CLI11 would refuse it for an
  // int32 without naming the range).
  int64_t heads_ = 0, tp_ = 1, dp_ = 1, mtp_k_ = 0, batch_ = 0, graph_ = 0;
  bool eager_ = false, json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterTriage(CLI::App& app) {
  return std::make_unique<TriageCommand>(app);
}

}  // namespace mlasim::cli
