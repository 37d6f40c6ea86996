#include "tools/mlasim/html_output.h"

#include <filesystem>
#include <system_error>

#include "sim/os_error.h"

namespace mlasim::cli {

Status CheckOutputFile(const std::string& flag, const std::string& path) {
  return sim::CheckOutputFile(flag, path);
}

Status CheckDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  std::vector<std::pair<fs::path, std::string>> seen;  // canonical path, flag
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec) canonical = fs::absolute(path).lexically_normal();
    for (const auto& [other, other_flag] : seen)
      if (other == canonical)
        return InvalidArgumentError(flag, path + " is also " + other_flag +
                                              "'s output (each output needs a file of its own)");
    seen.emplace_back(canonical, flag);
  }
  return OkStatus();
}

Status CheckOutputsAreNotInputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                                const std::vector<std::pair<std::string, std::string>>& inputs) {
  namespace fs = std::filesystem;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    for (const auto& [what, input] : inputs) {
      std::error_code ec;
      if (!input.empty() && fs::equivalent(path, input, ec) && !ec)
        return InvalidArgumentError(flag, path + " is " + what +
                                              ", which this command reads (an output needs a "
                                              "file of its own)");
    }
  }
  return OkStatus();
}

Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text) {
  return sim::WriteTextFile(flag, path, text);
}

}  // namespace mlasim::cli
