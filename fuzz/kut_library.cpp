#include "fuzz/kut_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "kernels/gpu_api.h"
#include "sim/json_input.h"
#include "sim/os_error.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr const char* kField = "--kernel-under-test";

Status Bad(const std::string& path, const std::string& why) {
  return InvalidArgumentError(kField, path + ": " + why);
}

std::string DtypeList(uint32_t mask) {
  std::string out;
  for (int d = 1; d <= MLASIM_KUT_INT32; ++d)
    if (mask & MLASIM_KUT_DTYPE_BIT(d)) out += (out.empty() ? "" : ",") + KutDtypeName(d);
  return out.empty() ? "none" : out;
}

}  // namespace

std::string KutDtypeName(int32_t dtype) {
  static const char* kNames[] = {"", "bf16", "fp16", "fp32", "fp8_e4m3fn", "int32"};
  if (dtype >= MLASIM_KUT_BF16 && dtype <= MLASIM_KUT_INT32) return kNames[dtype];
  return "dtype " + std::to_string(dtype);
}

std::string KutDescription::Unsupported(int32_t op, int32_t heads, int32_t head_dim_qk,
                                        int32_t head_dim_v, int32_t page_size,
                                        bool sparse_call) const {
  auto multiple = [](int32_t v, int32_t m) { return m <= 1 || v % m == 0; };
  if (!(ops & MLASIM_KUT_OP_BIT(op)))
    return op == MLASIM_KUT_OP_DECODE ? "the kernel runs no decode calls"
                                      : "the kernel runs no reduce calls";
  if (sparse_call ? !sparse : !dense)
    return sparse_call ? "the kernel runs no sparse calls" : "the kernel runs no dense calls";
  if (!multiple(heads, heads_multiple) || (max_heads > 0 && heads > max_heads))
    return std::to_string(heads) + " heads (the kernel runs multiples of " +
           std::to_string(heads_multiple) +
           (max_heads > 0 ? " up to " + std::to_string(max_heads) : std::string()) + ")";
  if (!multiple(head_dim_qk, head_dim_qk_multiple) || head_dim_qk > max_head_dim_qk ||
      !multiple(head_dim_v, head_dim_v_multiple) || head_dim_v > max_head_dim_v)
    return "head dims " + std::to_string(head_dim_qk) + "/" + std::to_string(head_dim_v) +
           " (the kernel runs multiples of " + std::to_string(head_dim_qk_multiple) + "/" +
           std::to_string(head_dim_v_multiple) + " up to " + std::to_string(max_head_dim_qk) + "/" +
           std::to_string(max_head_dim_v) + ")";
  if (max_page_size > 0 && page_size > max_page_size)
    return "page size " + std::to_string(page_size) + " (the kernel runs up to " +
           std::to_string(max_page_size) + ")";
  if (!multiple(page_size, page_size_multiple))
    return "page size " + std::to_string(page_size) + " (the kernel runs multiples of " +
           std::to_string(page_size_multiple) + ")";
  return "";
}

KernelLimits KutDescription::Limits() const {
  KernelLimits k;
  k.dense = dense || !sparse;  // a kernel that names neither is refused at each call instead
  k.sparse = sparse;
  k.fp8_kv = (kv_dtypes & MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN)) != 0;
  k.bf16_kv = (kv_dtypes & MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16)) != 0;
  if (!k.fp8_kv && !k.bf16_kv) k.fp8_kv = k.bf16_kv = true;  // fp32 only: holds either
  k.page_size_multiple = std::max(1, page_size_multiple);
  k.max_page_size = std::max(0, max_page_size);
  k.heads_multiple = std::max(1, heads_multiple);
  k.max_heads = std::max(0, max_heads);
  return k;
}

nlohmann::json KutDescription::ToJson() const {
  return {{"path", path},
          {"config", config},
          {"name", name},
          {"ops", ops},
          {"memory", host_memory ? "host" : "device"},
          {"q_dtypes", q_dtypes},
          {"kv_dtypes", kv_dtypes},
          {"o_dtypes", o_dtypes},
          {"dtypes", "q " + DtypeList(q_dtypes) + ", kv " + DtypeList(kv_dtypes) + ", o " +
                         DtypeList(o_dtypes)},
          {"heads_multiple", heads_multiple},
          {"max_heads", max_heads},
          {"head_dim_qk_multiple", head_dim_qk_multiple},
          {"max_head_dim_qk", max_head_dim_qk},
          {"head_dim_v_multiple", head_dim_v_multiple},
          {"max_head_dim_v", max_head_dim_v},
          {"max_page_size", max_page_size},
          {"page_size_multiple", page_size_multiple},
          {"dense", dense},
          {"sparse", sparse},
          {"decode_contract", decode_contract->doc},
          {"reduce_contract", reduce_contract->doc}};
}

StatusOr<KutDescription> KutDescription::FromJson(const nlohmann::json& j) {
  // Every field typed and in range before it is stored: the line comes from a worker process
  // that loaded an untrusted library (a missing key or 1e30 in a uint32 must be an error).
  KutDescription d;
  sim::ObjectReader r(j, "$");
  Status st = r.Check();
  for (auto [key, out] :
       {std::pair{"path", &d.path}, std::pair{"config", &d.config}, std::pair{"name", &d.name}})
    if (st.ok()) st = r.String(key, out, true);
  std::string memory;
  if (st.ok()) st = r.String("memory", &memory, true);
  if (st.ok() && memory != "host" && memory != "device")
    st = InvalidArgumentError(r.Path("memory"), "must be \"host\" or \"device\"");
  d.host_memory = memory == "host";
  for (auto [key, out] :
       {std::pair{"ops", &d.ops}, std::pair{"q_dtypes", &d.q_dtypes},
        std::pair{"kv_dtypes", &d.kv_dtypes}, std::pair{"o_dtypes", &d.o_dtypes}}) {
    int64_t v = 0;
    if (st.ok()) st = r.Int64(key, &v, 0, UINT32_MAX, true);
    *out = static_cast<uint32_t>(v);
  }
  for (auto [key, out] :
       {std::pair{"heads_multiple", &d.heads_multiple}, std::pair{"max_heads", &d.max_heads},
        std::pair{"head_dim_qk_multiple", &d.head_dim_qk_multiple},
        std::pair{"max_head_dim_qk", &d.max_head_dim_qk},
        std::pair{"head_dim_v_multiple", &d.head_dim_v_multiple},
        std::pair{"max_head_dim_v", &d.max_head_dim_v},
        std::pair{"max_page_size", &d.max_page_size},
        std::pair{"page_size_multiple", &d.page_size_multiple}})
    if (st.ok()) st = r.Int(key, out, INT32_MIN, INT32_MAX, true);
  for (auto [key, out] : {std::pair{"dense", &d.dense}, std::pair{"sparse", &d.sparse}}) {
    if (st.ok() && !r.Has(key)) st = InvalidArgumentError(r.Path(key), "required key is missing");
    if (st.ok()) st = r.Bool(key, out);
  }
  if (!st.ok())
    return InvalidArgumentError(
        kField, "malformed kernel description: " + st.field() + ": " + st.message());
  for (auto [key, slot] : {std::pair{"decode_contract", &d.decode_contract},
                           std::pair{"reduce_contract", &d.reduce_contract}}) {
    const nlohmann::json* c = r.Child(key);
    if (c == nullptr)
      return InvalidArgumentError(kField, std::string("malformed kernel description: $.") + key +
                                              ": required key is missing");
    auto parsed = sim::ParseContract(*c, d.path + " (" + key + ")");
    if (!parsed.ok()) return InvalidArgumentError(kField, parsed.status().message());
    *slot = std::make_shared<const sim::Contract>(std::move(*parsed));
  }
  return d;
}

StatusOr<std::shared_ptr<const sim::Contract>> ResolveKutContract(const char* reference,
                                                                  sim::CallKind call,
                                                                  const std::string& library_dir) {
  const std::string ref =
      reference == nullptr
          ? std::string("builtin:") + (call == sim::CallKind::kDecode ? "asm" : "mla_reduce_v1")
          : reference;
  const std::string what = std::string(sim::CallKindName(call)) + " contract '" +
                           (ref.size() > 60 ? ref.substr(0, 57) + "..." : ref) + "'";
  StatusOr<sim::Contract> parsed = InvalidArgumentError(kField, "unreachable");
  const size_t first = ref.find_first_not_of(" \t\r\n");
  if (ref.rfind("builtin:", 0) == 0) {
    auto b = sim::BuiltinContract(call, ref.substr(8), kField);
    if (!b.ok()) return InvalidArgumentError(kField, what + ": " + b.status().message());
    return *b;
  } else if (first != std::string::npos && ref[first] == '{') {
    auto doc = sim::ParseJsonStrict(ref, what);
    if (!doc.ok()) return InvalidArgumentError(kField, doc.status().message());
    parsed = sim::ParseContract(*doc, what);
  } else {
    const fs::path p = fs::path(ref).is_absolute() ? fs::path(ref) : fs::path(library_dir) / ref;
    parsed = sim::LoadContractFile(p.string());
  }
  if (!parsed.ok()) return InvalidArgumentError(kField, what + ": " + parsed.status().message());
  if (parsed->call != call)
    return InvalidArgumentError(kField, what + " is a " + sim::CallKindName(parsed->call) +
                                            " contract, not a " + sim::CallKindName(call) + " one");
  return std::make_shared<const sim::Contract>(std::move(*parsed));
}

StatusOr<KutDescription> DescriptionFromInfo(const mlasim_kut_info& info, const std::string& path,
                                             const std::string& config,
                                             const std::string& library_dir) {
  KutDescription d;
  d.path = path;
  d.config = config;
  d.name = info.name ? info.name : "(unnamed)";
  d.ops = info.ops;
  if (!(d.ops &
        (MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE))))
    return Bad(path, "describes no operation (ops must name decode and / or reduce)");
  if (info.memory != MLASIM_KUT_MEMORY_HOST && info.memory != MLASIM_KUT_MEMORY_DEVICE)
    return Bad(path, "describes memory " + std::to_string(info.memory) +
                         " (MLASIM_KUT_MEMORY_HOST or MLASIM_KUT_MEMORY_DEVICE)");
  d.host_memory = info.memory == MLASIM_KUT_MEMORY_HOST;
  d.q_dtypes = info.q_dtypes;
  d.kv_dtypes = info.kv_dtypes;
  d.o_dtypes = info.o_dtypes;
  d.heads_multiple = std::max(1, info.heads_multiple);
  d.max_heads = info.max_heads;
  d.head_dim_qk_multiple = std::max(1, info.head_dim_qk_multiple);
  d.max_head_dim_qk = info.max_head_dim_qk;
  d.head_dim_v_multiple = std::max(1, info.head_dim_v_multiple);
  d.max_head_dim_v = info.max_head_dim_v;
  d.max_page_size = info.max_page_size;
  if (info.page_size_multiple < 0)
    return Bad(path, "describes page_size_multiple " + std::to_string(info.page_size_multiple) +
                         " (0 or 1: any page size; N: multiples of N)");
  d.page_size_multiple = std::max(1, info.page_size_multiple);
  d.dense = info.dense != 0;
  d.sparse = info.sparse != 0;
  // The library's name in front of a contract that does not resolve: which library said it.
  auto decode = ResolveKutContract(info.decode_contract, sim::CallKind::kDecode, library_dir);
  if (!decode.ok()) return Bad(path, decode.status().message());
  auto reduce = ResolveKutContract(info.reduce_contract, sim::CallKind::kReduce, library_dir);
  if (!reduce.ok()) return Bad(path, reduce.status().message());
  d.decode_contract = *decode;
  d.reduce_contract = *reduce;
  return d;
}

StatusOr<std::unique_ptr<KutLibrary>> KutLibrary::Open(const std::string& path,
                                                       const std::string& config) {
  std::unique_ptr<KutLibrary> lib(new KutLibrary());
  MLASIM_RETURN_IF_ERROR(sim::CheckReadableFile(kField, path));  // missing, unreadable, a folder
  // A name without a slash would be searched on the library path: load what the user named.
  const std::string load = path.find('/') == std::string::npos ? "./" + path : path;
  lib->handle_ = ::dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* e = ::dlerror();
    return Bad(path, std::string("cannot be loaded: ") + (e ? e : "dlopen failed"));
  }
  auto sym = [&](const char* name) { return ::dlsym(lib->handle_, name); };
  auto version = reinterpret_cast<mlasim_kut_abi_version_fn>(sym("mlasim_kut_abi_version"));
  auto describe = reinterpret_cast<mlasim_kut_describe_fn>(sym("mlasim_kut_describe"));
  lib->run_ = reinterpret_cast<mlasim_kut_run_fn>(sym("mlasim_kut_run"));
  lib->last_error_ = reinterpret_cast<mlasim_kut_last_error_fn>(sym("mlasim_kut_last_error"));
  for (auto [name, p] : {std::pair{"mlasim_kut_abi_version", reinterpret_cast<void*>(version)},
                         std::pair{"mlasim_kut_describe", reinterpret_cast<void*>(describe)},
                         std::pair{"mlasim_kut_run", reinterpret_cast<void*>(lib->run_)}})
    if (p == nullptr)
      return Bad(path, std::string("exports no ") + name +
                           " (a kernel under test exports mlasim_kut_abi_version, "
                           "mlasim_kut_describe and mlasim_kut_run: kernels/mlasim_kut.h)");
  const uint32_t v = version();
  if (v != MLASIM_KUT_ABI_VERSION)
    return Bad(path, "speaks kernel-under-test ABI version " + std::to_string(v) +
                         ", this mlasim speaks version " + std::to_string(MLASIM_KUT_ABI_VERSION) +
                         " (rebuild it against this mlasim's kernels/mlasim_kut.h)");
  mlasim_kut_info info{};
  info.struct_bytes = sizeof(info);
  const int rc = describe(config.c_str(), &info);
  if (rc != MLASIM_KUT_OK) {
    const char* e = lib->last_error_ ? lib->last_error_() : nullptr;
    return Bad(path, "mlasim_kut_describe(\"" + config + "\") returned " + std::to_string(rc) +
                         (e && *e ? std::string(": ") + e : std::string()));
  }
  if (info.abi_version != MLASIM_KUT_ABI_VERSION)
    return Bad(path, "mlasim_kut_describe wrote abi_version " + std::to_string(info.abi_version) +
                         " into its mlasim_kut_info, expected " +
                         std::to_string(MLASIM_KUT_ABI_VERSION));
  const std::string dir = fs::path(fs::absolute(load)).parent_path().string();
  MLASIM_ASSIGN_OR_RETURN(lib->desc_, DescriptionFromInfo(info, path, config, dir));
  return lib;
}

KutLibrary::~KutLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

int KutLibrary::Run(const mlasim_kut_call& call, std::string* error) const {
  const int rc = run_(&call);
  if (rc != MLASIM_KUT_OK && error != nullptr) {
    const char* e = last_error_ ? last_error_() : nullptr;
    *error = e && *e ? e : "no message (the library exports no mlasim_kut_last_error)";
  }
  return rc;
}

std::string DefaultGpuKutPath() {
  return gpu::kut_library_path();
}

}  // namespace mlasim::fuzz
