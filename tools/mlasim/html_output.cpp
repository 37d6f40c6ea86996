#include "tools/mlasim/html_output.h"

#include <filesystem>
#include <fstream>

namespace mlasim::cli {

Status CheckOutputFile(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (path.empty()) return InvalidArgumentError(flag, "needs a file name");
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgumentError(flag, path + " is a directory");
  std::ofstream f(path, std::ios::app);
  if (!f) return InvalidArgumentError(flag, "cannot write " + path);
  return OkStatus();
}

Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text) {
  if (Status st = CheckOutputFile(flag, path); !st.ok()) return st;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) {
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
  }
  if (!f) return InvalidArgumentError(flag, "cannot write " + path);
  return OkStatus();
}

}  // namespace mlasim::cli
