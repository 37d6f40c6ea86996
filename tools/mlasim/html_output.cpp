#include "tools/mlasim/html_output.h"

#include "sim/os_error.h"

namespace mlasim::cli {

Status CheckOutputFile(const std::string& flag, const std::string& path) {
  return sim::CheckOutputFile(flag, path);
}

Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text) {
  return sim::WriteTextFile(flag, path, text);
}

}  // namespace mlasim::cli
