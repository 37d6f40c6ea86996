// kut_client.cpp - where mlasim's own GPU kernel library lives (gpu_api.h kut_library_path) and,
// in GPU builds, the client run_mla_decode (kernels/decode.hip) calls the decode kernels through
// (kernels/kut_client.h). Host C++ only; compiled in every build.
#include "kernels/kut_client.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "kernels/gpu_api.h"

namespace mlasim::gpu {

std::string kut_library_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("MLASIM_KUT_GPU_LIBRARY"); env != nullptr && *env != '\0')
    return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {exe.parent_path() / "libmlasim_kut_gpu.so",
                            exe.parent_path() / ".." / "lib" / "libmlasim_kut_gpu.so"})
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  return "";
}

const KutClient& KutClient::Get() {
  static std::once_flag once;
  static KutClient client;
  static std::string error;
  std::call_once(once, [] {
    const std::string path = kut_library_path();
    if (path.empty()) {
      error =
          "mlasim's GPU kernel library libmlasim_kut_gpu.so was not found beside the binary "
          "(set MLASIM_KUT_GPU_LIBRARY)";
      return;
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      error = path + ": cannot be loaded: " + (e ? e : "dlopen failed");
      return;
    }
    auto version =
        reinterpret_cast<mlasim_kut_abi_version_fn>(::dlsym(h, "mlasim_kut_abi_version"));
    client.run_ = reinterpret_cast<mlasim_kut_run_fn>(::dlsym(h, "mlasim_kut_run"));
    client.last_error_ =
        reinterpret_cast<mlasim_kut_last_error_fn>(::dlsym(h, "mlasim_kut_last_error"));
    client.kernel_name_ =
        reinterpret_cast<KernelNameFn>(::dlsym(h, "mlasim_kut_gpu_kernel_name_v2"));
    if (version == nullptr || client.run_ == nullptr || version() != MLASIM_KUT_ABI_VERSION) {
      error = path + ": not a kernel library of this mlasim's ABI version";
      client.run_ = nullptr;
    }
  });
  if (client.run_ == nullptr) throw std::runtime_error(error);
  return client;
}

void KutClient::Run(const mlasim_kut_call& call) const {
  const int rc = run_(&call);
  if (rc == MLASIM_KUT_OK) return;
  const char* e = last_error_ ? last_error_() : nullptr;
  const std::string what = "mlasim_kut_run: " + std::string(e && *e ? e : "failed");
  if (rc == MLASIM_KUT_UNSUPPORTED) throw std::invalid_argument(what);
  throw std::runtime_error(what);
}

std::string KutClient::KernelName(const char* config, int heads, int head_dim_qk, int head_dim_v,
                                  int kv_fp8, int q_fp8) const {
  return kernel_name_ ? kernel_name_(config, heads, head_dim_qk, head_dim_v, kv_fp8, q_fp8) : "";
}

}  // namespace mlasim::gpu
