#include "fuzz/progress.h"

#include <fmt/format.h>

#include <cmath>

#include "fuzz/search.h"
#include "sim/json_input.h"

namespace mlasim::fuzz {

nlohmann::json IdentityJson(const CampaignIdentity& id) {
  nlohmann::json j = {{"format", kProgressFormat},
                      {"seed", id.seed},
                      {"profiles", id.profiles},
                      {"small", id.small},
                      {"ignore_known", id.ignore_known},
                      {"generate", id.generate},
                      {"contracts", id.contract_files},
                      {"swarm", id.swarm},
                      {"shrink", id.shrink},
                      {"shard", id.shard},
                      {"shards", id.shards},
                      {"max_shrink_steps", id.max_shrink_steps},
                      {"step_numerics_every", id.step_numerics_every}};
  if (!id.kernel.empty()) j["kernel"] = id.kernel;
  return j;
}

std::string ProgressFileName(int32_t shard, int32_t shards) {
  return fmt::format(".progress-{}-of-{}", shard, shards);
}

std::string ProgressText(const Progress& p) {
  nlohmann::json doc = IdentityJson(p.identity);
  doc["next_index"] = p.next_index;
  doc["seconds_spent"] = p.seconds_spent;
  doc["signatures"] = p.signatures;
  return doc.dump() + '\n';
}

namespace {

Status Bad(const std::string& field, const std::string& path, const std::string& why) {
  return InvalidArgumentError(field, field == path ? why : path + ": " + why);
}

// "KEY is out of the 64-bit integer range (...)" for a number beyond 64 bits, else `reason`.
std::string Beyond64Or(const char* key, const nlohmann::json& v, const std::string& reason) {
  return sim::IsIntegerBeyond64Bits(v) ? std::string(key) + " " + sim::NotAnIntegerReason(v)
                                       : reason;
}

// The identity fields, type-checked.
Status ReadIdentity(const nlohmann::json& doc, const std::string& path, const std::string& field,
                    CampaignIdentity* id) {
  const auto& seed = doc["seed"];
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
    return Bad(field, path, Beyond64Or("seed", seed, "seed must be a non-negative integer"));
  id->seed = seed.get<uint64_t>();
  const auto& profiles = doc["profiles"];
  if (!profiles.is_array()) return Bad(field, path, "profiles must be an array of names");
  for (const auto& p : profiles) {
    if (!p.is_string()) return Bad(field, path, "profiles must be an array of names");
    id->profiles.push_back(p.get<std::string>());
  }
  for (const char* k : {"small", "ignore_known"})
    if (!doc[k].is_boolean()) return Bad(field, path, std::string(k) + " must be true or false");
  id->small = doc["small"].get<bool>();
  id->ignore_known = doc["ignore_known"].get<bool>();
  // Added after format 2 was first written: absent means none.
  for (const char* k : {"generate", "contracts"}) {
    if (!doc.contains(k)) continue;
    if (!doc[k].is_array()) return Bad(field, path, std::string(k) + " must be an array of names");
    for (const auto& x : doc[k]) {
      if (!x.is_string()) return Bad(field, path, std::string(k) + " must be an array of names");
      (std::string(k) == "generate" ? id->generate : id->contract_files)
          .push_back(x.get<std::string>());
    }
  }
  if (doc.contains("swarm")) {  // added with swarm generation: absent means off
    if (!doc["swarm"].is_boolean()) return Bad(field, path, "swarm must be true or false");
    id->swarm = doc["swarm"].get<bool>();
  }
  if (doc.contains("shrink")) {  // added with --shrink: absent means per-signature
    if (!doc["shrink"].is_string() || !ParseShrinkPolicy(doc["shrink"].get<std::string>()).ok())
      return Bad(field, path, "shrink must be \"per-signature\" or \"first-failure\"");
    id->shrink = doc["shrink"].get<std::string>();
  }
  const auto& shard = doc["shard"];
  const auto& shards = doc["shards"];
  if (!sim::IsInt64(shard) || !sim::IsInt64(shards) || shards.get<int64_t>() < 1 ||
      shards.get<int64_t>() > 1000000 || shard.get<int64_t>() < 0 ||
      shard.get<int64_t>() >= shards.get<int64_t>())
    return Bad(field, path,
               Beyond64Or(sim::IsIntegerBeyond64Bits(shard) ? "shard" : "shards",
                          sim::IsIntegerBeyond64Bits(shard) ? shard : shards,
                          "shard and shards must satisfy 0 <= shard < shards <= 1000000"));
  id->shard = static_cast<int32_t>(shard.get<int64_t>());
  id->shards = static_cast<int32_t>(shards.get<int64_t>());
  const auto& steps = doc["max_shrink_steps"];
  if (!sim::IsInt64(steps) || steps.get<int64_t>() < 0 || steps.get<int64_t>() > 100000)
    return Bad(
        field, path,
        Beyond64Or("max_shrink_steps", steps, "max_shrink_steps must be an integer in 0..100000"));
  id->max_shrink_steps = static_cast<int>(steps.get<int64_t>());
  if (doc.contains("step_numerics_every")) {  // added with campaign numerics: absent means 0
    const auto& every = doc["step_numerics_every"];
    if (!sim::IsInt64(every) || every.get<int64_t>() < 0)
      return Bad(field, path,
                 Beyond64Or("step_numerics_every", every,
                            "step_numerics_every must be a non-negative integer"));
    id->step_numerics_every = every.get<int64_t>();
  }
  if (doc.contains("kernel")) {
    if (!doc["kernel"].is_string()) return Bad(field, path, "kernel must be a string");
    id->kernel = doc["kernel"].get<std::string>();
  }
  return OkStatus();
}

}  // namespace

StatusOr<Progress> ReadProgressFile(const std::string& path, const std::string& field) {
  auto text = sim::ReadTextFile(path, field);
  if (!text.ok()) return text.status();
  return ParseProgressText(*text, path, field);
}

StatusOr<Progress> ParseProgressText(const std::string& text, const std::string& path,
                                     const std::string& field) {
  auto doc = sim::ParseJsonStrict(text, field);
  if (!doc.ok()) return Bad(field, path, doc.status().message());
  if (!doc->is_object()) return Bad(field, path, "not a progress file (not a JSON object)");
  for (const char* k : {"format", "seed", "profiles", "small", "ignore_known", "shard", "shards",
                        "max_shrink_steps", "next_index", "seconds_spent", "signatures"})
    if (!doc->contains(k)) {
      if (std::string(k) == "format" || std::string(k) == "signatures")
        return Bad(field, path,
                   "written by an older mlasim (progress format 1, first violations only); "
                   "start a new --out");
      return Bad(field, path, std::string("missing ") + k);
    }
  if ((*doc)["format"] != kProgressFormat)
    return Bad(field, path,
               fmt::format("progress format {}, this mlasim reads {}", (*doc)["format"].dump(),
                           kProgressFormat));
  Progress p;
  MLASIM_RETURN_IF_ERROR(ReadIdentity(*doc, path, field, &p.identity));
  const auto& next = (*doc)["next_index"];
  if (!sim::IsInt64(next) || next.get<int64_t>() < 0 || next.get<int64_t>() > kMaxProgressIndex)
    return Bad(field, path,
               Beyond64Or("next_index", next, "next_index must be an integer in 0..2^50"));
  p.next_index = next.get<int64_t>();
  const auto& secs = (*doc)["seconds_spent"];
  if (!secs.is_number() || !std::isfinite(secs.get<double>()) || secs.get<double>() < 0)
    return Bad(field, path, "seconds_spent must be a finite number >= 0");
  p.seconds_spent = secs.get<double>();
  const auto& sigs = (*doc)["signatures"];
  if (!sigs.is_array()) return Bad(field, path, "signatures must be an array");
  for (const auto& s : sigs) {
    if (!s.is_string()) return Bad(field, path, "signatures holds signatures (strings)");
    p.signatures.insert(s.get<std::string>());
  }
  return p;
}

}  // namespace mlasim::fuzz
