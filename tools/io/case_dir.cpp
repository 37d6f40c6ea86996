#include "tools/io/case_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "sim/fault.h"
#include "sim/json_input.h"
#include "sim/os_error.h"

namespace mlasim::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Errors of the manifest: "CASE/manifest.json:tensors.q.shape".
class ManifestErrors {
 public:
  explicit ManifestErrors(std::string display) : display_(std::move(display)) {}
  Status operator()(const std::string& path, const std::string& reason) const {
    return InvalidArgumentError(display_ + (path.empty() ? "" : ":" + path), reason);
  }

 private:
  std::string display_;
};

bool Printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A plain file name inside the case directory: no separators, no leading dot, ends in ".npy".
bool IsSafeNpyName(const std::string& s) {
  if (s.size() < 5 || s[0] == '.' || s.substr(s.size() - 4) != ".npy") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

StatusOr<std::string> String(const json& obj, const std::string& key, const std::string& path,
                             const ManifestErrors& err, size_t max_chars) {
  if (!obj.contains(key)) return err(path + key, "required key is missing");
  const json& v = obj.at(key);
  if (!v.is_string()) return err(path + key, "must be a string");
  const std::string s = v.get<std::string>();
  if (s.empty() || s.size() > max_chars || !Printable(s))
    return err(path + key, "must be 1.." + std::to_string(max_chars) + " printable characters");
  return s;
}

StatusOr<int64_t> Int(const json& obj, const std::string& key, const std::string& path,
                      const ManifestErrors& err, int64_t lo, int64_t hi) {
  if (!obj.contains(key)) return err(path + key, "required key is missing");
  const json& v = obj.at(key);
  if (!sim::IsInt64(v)) return err(path + key, sim::IntegerRangeReason(v, lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    return err(path + key, "is " + std::to_string(x) + ", outside " + std::to_string(lo) + ".." +
                               std::to_string(hi));
  return x;
}

StatusOr<std::vector<int64_t>> IntArray(const json& obj, const std::string& key,
                                        const std::string& path, const ManifestErrors& err,
                                        int64_t lo, int64_t hi, int32_t max_len) {
  if (!obj.contains(key)) return err(path + key, "required key is missing");
  const json& v = obj.at(key);
  if (!v.is_array()) return err(path + key, "must be an array of integers");
  if (static_cast<int64_t>(v.size()) > max_len)
    return err(path + key, "has " + std::to_string(v.size()) +
                               " entries, above mlasim's limit of " + std::to_string(max_len) +
                               " dimensions");
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = path + key + "[" + std::to_string(i) + "]";
    if (!sim::IsInt64(v[i])) return err(p, sim::IntegerRangeReason(v[i], lo, hi));
    const int64_t x = v[i].get<int64_t>();
    if (x < lo || x > hi)
      return err(p, "is " + std::to_string(x) + ", outside " + std::to_string(lo) + ".." +
                        std::to_string(hi));
    out.push_back(x);
  }
  return out;
}

Status OnlyKeys(const json& obj, const std::set<std::string>& keys, const std::string& path,
                const ManifestErrors& err) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!keys.count(it.key())) return err(path + it.key(), "unknown key");
  return OkStatus();
}

// prod(shape) * itemsize and the byte span of the elements around element 0, overflow-checked
// (every extent and |stride| is bounded by the limits, so each product fits 2^62 or is refused).
Status ComputeExtent(CaseTensor& t, const std::string& path, const ManifestErrors& err) {
  int64_t elements = 1;
  for (const int64_t d : t.shape) {
    if (d != 0 && elements > (int64_t{1} << 62) / t.itemsize / d)
      return err(path + "shape", "holds more than 2^62 bytes");
    elements *= d;
  }
  const int64_t nbytes = elements * t.itemsize;
  if (t.nbytes != nbytes)
    return err(path + "nbytes", "is " + std::to_string(t.nbytes) + " but shape " +
                                    NpyShapeString(t.shape) + " of " + t.dtype + " (" +
                                    std::to_string(t.itemsize) + " bytes) holds " +
                                    std::to_string(nbytes));
  if (elements == 0) return OkStatus();
  int64_t lo = 0, hi = 0;  // element offsets of the first and last element in memory
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] > 1 && std::llabs(t.strides[i]) > (int64_t{1} << 60) / (t.shape[i] - 1))
      return err(path + "strides", "the tensor spans more than 2^60 elements");
    const int64_t reach = (t.shape[i] - 1) * t.strides[i];  // |reach| <= 2^60 (checked above)
    (reach < 0 ? lo : hi) += reach;
    if (hi > (int64_t{1} << 60) || lo < -(int64_t{1} << 60))
      return err(path + "strides", "the tensor spans more than 2^60 elements");
  }
  t.span_begin = lo * t.itemsize;
  t.span_end = (hi + 1) * t.itemsize;
  return OkStatus();
}

StatusOr<uint64_t> ParseAddress(const json& obj, const std::string& key, const std::string& path,
                                const ManifestErrors& err) {
  MLASIM_ASSIGN_OR_RETURN(const std::string s, String(obj, key, path, err, 64));
  StatusOr<uint64_t> address = sim::ParseAddressText(s, path + key);  // says what is wrong
  if (!address.ok()) return err(path + key, address.status().message());
  const auto lower = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (s.compare(0, 2, "0x") != 0 || !std::all_of(s.begin() + 2, s.end(), lower))
    return err(path + key, "'" + s + "' is not a lowercase 0x hex address of at most 64 bits");
  return *address;
}

StatusOr<CaseTensor> ParseTensor(const std::string& name, const json& e, const std::string& path,
                                 const ManifestErrors& err, const CaseLimits& limits) {
  if (!e.is_object()) return err(path, "must be an object");
  MLASIM_RETURN_IF_ERROR(
      OnlyKeys(e, {"file", "dtype", "descr", "shape", "strides", "nbytes", "data_ptr", "device"},
               path + ".", err));
  const std::string p = path + ".";
  CaseTensor t;
  t.name = name;
  MLASIM_ASSIGN_OR_RETURN(t.file, String(e, "file", p, err, limits.max_name_chars + 4));
  if (!IsSafeNpyName(t.file))
    return err(p + "file", "'" + t.file +
                               "' must be a plain file name ending in .npy (letters, digits, _ - "
                               ".; no directories)");
  MLASIM_ASSIGN_OR_RETURN(t.dtype, String(e, "dtype", p, err, 32));
  const CaseDType* dt = FindCaseDType(t.dtype);
  if (!dt) {
    std::string names;
    for (const CaseDType& d : CaseDTypes())
      names += (names.empty() ? "" : ", ") + std::string(d.name);
    return err(p + "dtype", "unknown dtype '" + t.dtype + "' (expected one of: " + names + ")");
  }
  t.itemsize = dt->itemsize;
  MLASIM_ASSIGN_OR_RETURN(t.descr, String(e, "descr", p, err, 8));
  if (t.descr != dt->descr)
    return err(p + "descr", "is '" + t.descr + "' but a " + t.dtype + " tensor is stored as '" +
                                dt->descr + "'");
  MLASIM_ASSIGN_OR_RETURN(t.device, String(e, "device", p, err, 64));
  MLASIM_ASSIGN_OR_RETURN(t.shape,
                          IntArray(e, "shape", p, err, 0, limits.npy.max_dim, limits.npy.max_ndim));
  MLASIM_ASSIGN_OR_RETURN(t.strides, IntArray(e, "strides", p, err, -limits.max_stride,
                                              limits.max_stride, limits.npy.max_ndim));
  if (t.strides.size() != t.shape.size())
    return err(p + "strides", "has " + std::to_string(t.strides.size()) + " entries, shape has " +
                                  std::to_string(t.shape.size()));
  MLASIM_ASSIGN_OR_RETURN(t.nbytes, Int(e, "nbytes", p, err, 0, int64_t{1} << 62));
  MLASIM_ASSIGN_OR_RETURN(t.data_ptr, ParseAddress(e, "data_ptr", p, err));
  MLASIM_RETURN_IF_ERROR(ComputeExtent(t, p, err));
  // The bytes the tensor spans, [data_ptr + span_begin, data_ptr + span_end), must be addresses:
  // faults are attributed by address (explain-fault refuses the same in a layout).
  // (|span_begin| in unsigned arithmetic: it may be 2^63, 2^60 elements of 8 bytes)
  const uint64_t below = t.span_begin < 0 ? uint64_t{0} - static_cast<uint64_t>(t.span_begin) : 0;
  if (below > t.data_ptr)
    return err(p + "data_ptr", "the tensor's lowest byte (data_ptr - " + std::to_string(below) +
                                   ") is below address 0");
  if (t.span_end > 0 && static_cast<uint64_t>(t.span_end) > ~uint64_t{0} - t.data_ptr + 1)
    return err(p + "data_ptr", "data_ptr + the tensor's " + std::to_string(t.span_end) +
                                   " bytes passes 2^64");
  return t;
}

Status ParseVersions(const json& m, CaseManifest& out, const ManifestErrors& err) {
  if (!m.contains("versions")) return err("versions", "required key is missing");
  const json& v = m.at("versions");
  if (!v.is_object()) return err("versions", "must be an object of version strings");
  if (v.size() > 32) return err("versions", "holds more than 32 entries");
  for (auto it = v.begin(); it != v.end(); ++it)
    MLASIM_RETURN_IF_ERROR(String(v, it.key(), "versions.", err, 64).status());
  MLASIM_RETURN_IF_ERROR(String(v, "mlasim", "versions.", err, 64).status());
  out.versions = v;
  return OkStatus();
}

// Compares one .npy header with its manifest entry, and its size with the header.
Status CheckNpyAgainstManifest(const CaseFiles& files, CaseTensor& t, const std::string& manifest,
                               const CaseLimits& limits) {
  const std::string field = files.Display(t.file);
  MLASIM_ASSIGN_OR_RETURN(const int64_t size, files.Size(t.file));
  MLASIM_ASSIGN_OR_RETURN(const std::string first,
                          files.Read(t.file, 0, std::min<int64_t>(size, 12)));
  int64_t header_len = 0;
  MLASIM_ASSIGN_OR_RETURN(const int64_t preamble,
                          ParseNpyPreamble(first, field, limits.npy, &header_len));
  if (size < preamble + header_len)
    return InvalidArgumentError(
        field + ":header", "truncated: the file ends inside the header (" + std::to_string(size) +
                               " of " + std::to_string(preamble + header_len) + " bytes)");
  MLASIM_ASSIGN_OR_RETURN(const std::string dict, files.Read(t.file, preamble, header_len));
  MLASIM_ASSIGN_OR_RETURN(t.header, ParseNpyHeaderDict(dict, field, limits.npy));
  t.header.major = static_cast<unsigned char>(first[6]);
  t.header.data_offset = preamble + header_len;
  const std::string entry = manifest + ":tensors." + t.name;
  if (t.header.descr != t.descr)
    return InvalidArgumentError(field + ":header.descr", "is '" + t.header.descr + "' but " +
                                                             entry + ".descr is '" + t.descr +
                                                             "' (dtype " + t.dtype + ")");
  if (t.header.fortran_order)
    return InvalidArgumentError(field + ":header.fortran_order",
                                "is True; case files hold C-order data (mlasim.capture writes "
                                "them so)");
  if (t.header.shape != t.shape)
    return InvalidArgumentError(field + ":header.shape", "is " + NpyShapeString(t.header.shape) +
                                                             " but " + entry + ".shape is " +
                                                             NpyShapeString(t.shape));
  return CheckNpyDataSize(t.header, size, field);
}

}  // namespace

const std::vector<CaseDType>& CaseDTypes() {
  static const std::vector<CaseDType> kTable = {
      {"bool", "|b1", 1},
      {"int8", "|i1", 1},
      {"uint8", "|u1", 1},
      {"int16", "<i2", 2},
      {"uint16", "<u2", 2},
      {"int32", "<i4", 4},
      {"uint32", "<u4", 4},
      {"int64", "<i8", 8},
      {"uint64", "<u8", 8},
      {"float16", "<f2", 2},
      {"float32", "<f4", 4},
      {"float64", "<f8", 8},
      {"bfloat16", "<u2", 2},
      {"float8_e4m3fn", "|u1", 1},
      {"float8_e4m3fnuz", "|u1", 1},
      {"float8_e5m2", "|u1", 1},
      {"float8_e5m2fnuz", "|u1", 1},
  };
  return kTable;
}

const CaseDType* FindCaseDType(std::string_view name) {
  for (const CaseDType& d : CaseDTypes())
    if (name == d.name) return &d;
  return nullptr;
}

const CaseTensor* CaseManifest::Find(std::string_view name) const {
  for (const CaseTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const CaseTensor* CaseManifest::FindKvCache() const {
  for (const char* name : kKvCacheNames)
    if (const CaseTensor* t = Find(name)) return t;
  return nullptr;
}

std::string HexAddress(uint64_t address) {
  static const char* kHex = "0123456789abcdef";
  std::string digits;
  do {
    digits.insert(digits.begin(), kHex[address & 15]);
    address >>= 4;
  } while (address);
  return "0x" + digits;
}

Status DiskCaseFiles::CheckDirectory() const {
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) {
    if (errno != ENOENT) return sim::OsError(dir_, sim::FileOp::kRead, dir_, errno);  // ENOTDIR
    // "does not exist", or "does not exist (there is no folder P)" when a parent is missing too.
    const std::string reason = sim::OsErrorReason(sim::FileOp::kRead, dir_, ENOENT);
    return InvalidArgumentError(dir_, "no such case directory" + reason.substr(14));
  }
  if (!S_ISDIR(st.st_mode))
    return InvalidArgumentError(dir_,
                                "is not a directory (give the case directory that holds "
                                "manifest.json)");
  return OkStatus();
}

std::string DiskCaseFiles::Display(const std::string& name) const {
  return (fs::path(dir_) / name).string();
}

StatusOr<int64_t> DiskCaseFiles::Size(const std::string& name) const {
  const std::string path = Display(name);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return InvalidArgumentError(path, "no such file");
    return sim::OsError(path, sim::FileOp::kRead, path, errno);
  }
  if (S_ISDIR(st.st_mode)) return sim::OsError(path, sim::FileOp::kRead, path, EISDIR);
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path, "is not a regular file");
  if (const int err = sim::OpenForReadErrno(path); err != 0)
    return sim::OsError(path, sim::FileOp::kRead, path, err);  // permission denied reading it
  return static_cast<int64_t>(st.st_size);
}

StatusOr<std::string> DiskCaseFiles::Read(const std::string& name, int64_t offset,
                                          int64_t bytes) const {
  const std::string path = Display(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) return sim::OsError(path, sim::FileOp::kRead, path, sim::OpenForReadErrno(path));
  std::string out(static_cast<size_t>(bytes), '\0');
  in.seekg(offset);
  in.read(out.data(), bytes);
  if (in.gcount() != bytes)
    return InvalidArgumentError(
        path, "truncated while reading: got " + std::to_string(in.gcount()) + " of " +
                  std::to_string(bytes) + " bytes at offset " + std::to_string(offset));
  return out;
}

StatusOr<int64_t> MemoryCaseFiles::Size(const std::string& name) const {
  const auto it = files.find(name);
  if (it == files.end()) return InvalidArgumentError(name, "no such file");
  return static_cast<int64_t>(it->second.size());
}

StatusOr<std::string> MemoryCaseFiles::Read(const std::string& name, int64_t offset,
                                            int64_t bytes) const {
  const auto it = files.find(name);
  if (it == files.end()) return InvalidArgumentError(name, "no such file");
  if (offset < 0 || bytes < 0 || offset + bytes > static_cast<int64_t>(it->second.size()))
    return InvalidArgumentError(name, "truncated while reading");
  return it->second.substr(static_cast<size_t>(offset), static_cast<size_t>(bytes));
}

StatusOr<CaseManifest> ParseCaseManifest(const std::string& text, const std::string& display,
                                         const CaseLimits& limits) {
  const ManifestErrors err(display);
  StatusOr<json> parsed = sim::ParseJsonStrict(text, display);
  if (!parsed.ok()) return err("", parsed.status().message());
  const json& m = *parsed;
  if (!m.is_object()) return err("", "must hold a JSON object");
  MLASIM_RETURN_IF_ERROR(
      OnlyKeys(m, {"format", "schema_version", "call", "versions", "config", "tensors"}, "", err));
  MLASIM_ASSIGN_OR_RETURN(const std::string format, String(m, "format", "", err, 32));
  if (format != kCaseFormat)
    return err("format", "is '" + format + "', expected '" + kCaseFormat + "'");
  CaseManifest out;
  MLASIM_ASSIGN_OR_RETURN(const int64_t version, Int(m, "schema_version", "", err, 1, 1 << 20));
  if (version != kCaseSchemaVersion)
    return err("schema_version", "is " + std::to_string(version) + "; this mlasim reads version " +
                                     std::to_string(kCaseSchemaVersion) +
                                     " (a newer mlasim wrote the case?)");
  out.schema_version = static_cast<int32_t>(version);
  MLASIM_ASSIGN_OR_RETURN(out.call, String(m, "call", "", err, limits.max_name_chars));
  MLASIM_RETURN_IF_ERROR(ParseVersions(m, out, err));
  if (!m.contains("config")) return err("config", "required key is missing");
  if (!m.at("config").is_object()) return err("config", "must be an object (the engine config)");
  out.config = m.at("config");
  // The keys mlasim reads with a meaning: another type, or an empty string, would be ignored (the
  // default contract run in place of the one named), so it is refused.
  for (const char* key : {"kernel", "contract", "call_kind"}) {
    const auto it = out.config.find(key);
    if (it == out.config.end()) continue;
    const bool empty = it->is_string() && it->get_ref<const std::string&>().empty();
    if (!it->is_string() || empty)
      return err(std::string("config.") + key,
                 std::string("must be a non-empty string (") +
                     (std::string(key) == "kernel"     ? "a decode kernel variant: asm, hk, opus"
                      : std::string(key) == "contract" ? "a contract file or built-in name"
                                                       : "decode or reduce") +
                     "), got " + (empty ? std::string("\"\"") : std::string(it->type_name())));
  }
  if (!m.contains("tensors")) return err("tensors", "required key is missing");
  const json& ts = m.at("tensors");
  if (!ts.is_object()) return err("tensors", "must be an object: tensor name -> entry");
  if (static_cast<int64_t>(ts.size()) > limits.max_tensors)
    return err("tensors", "holds " + std::to_string(ts.size()) + " tensors, above mlasim's limit " +
                              "of " + std::to_string(limits.max_tensors));
  std::set<std::string> files;
  for (auto it = ts.begin(); it != ts.end(); ++it) {
    const std::string path = "tensors." + it.key();
    if (!IsIdentifier(it.key()) || static_cast<int32_t>(it.key().size()) > limits.max_name_chars)
      return err(path, "a tensor name must be an identifier of at most " +
                           std::to_string(limits.max_name_chars) + " characters");
    MLASIM_ASSIGN_OR_RETURN(CaseTensor t, ParseTensor(it.key(), it.value(), path, err, limits));
    if (!files.insert(t.file).second)
      return err(path + ".file", "'" + t.file + "' is also another tensor's file");
    out.tensors.push_back(std::move(t));
  }
  return out;
}

StatusOr<CaseManifest> OpenCase(const CaseFiles& files, const CaseLimits& limits) {
  const std::string display = files.Display(kCaseManifestName);
  MLASIM_ASSIGN_OR_RETURN(const int64_t size, files.Size(kCaseManifestName));
  if (size > limits.max_manifest_bytes)
    return InvalidArgumentError(display, "is " + std::to_string(size) + " bytes, above mlasim's " +
                                             "limit of " +
                                             std::to_string(limits.max_manifest_bytes));
  MLASIM_ASSIGN_OR_RETURN(const std::string text, files.Read(kCaseManifestName, 0, size));
  MLASIM_ASSIGN_OR_RETURN(CaseManifest m, ParseCaseManifest(text, display, limits));
  for (CaseTensor& t : m.tensors)
    MLASIM_RETURN_IF_ERROR(CheckNpyAgainstManifest(files, t, display, limits));
  return m;
}

StatusOr<std::string> ReadTensorData(const CaseFiles& files, const CaseTensor& t,
                                     const CaseLimits& limits) {
  if (t.nbytes > limits.max_load_bytes)
    return InvalidArgumentError(files.Display(kCaseManifestName) + ":tensors." + t.name + ".nbytes",
                                std::to_string(t.nbytes) + " bytes is above mlasim's limit of " +
                                    std::to_string(limits.max_load_bytes) +
                                    " for a tensor whose values it reads");
  MLASIM_ASSIGN_OR_RETURN(const int64_t size, files.Size(t.file));
  MLASIM_RETURN_IF_ERROR(CheckNpyDataSize(t.header, size, files.Display(t.file)));
  return files.Read(t.file, t.header.data_offset, t.nbytes);
}

StatusOr<std::vector<int32_t>> ReadInt32Tensor(const CaseFiles& files, const CaseTensor& t,
                                               const std::vector<int32_t>& ranks,
                                               const std::string& purpose,
                                               const CaseLimits& limits) {
  const std::string entry = files.Display(kCaseManifestName) + ":tensors." + t.name;
  if (t.dtype != "int32")
    return InvalidArgumentError(entry + ".dtype", "is " + t.dtype + "; " + purpose + " is int32");
  if (!ranks.empty() &&
      std::find(ranks.begin(), ranks.end(), static_cast<int32_t>(t.shape.size())) == ranks.end()) {
    std::string want;
    for (const int32_t r : ranks) want += (want.empty() ? "" : " or ") + std::to_string(r);
    return InvalidArgumentError(entry + ".shape", NpyShapeString(t.shape) + " has " +
                                                      std::to_string(t.shape.size()) +
                                                      " dimensions; " + purpose + " has " + want);
  }
  MLASIM_ASSIGN_OR_RETURN(const std::string bytes, ReadTensorData(files, t, limits));
  std::vector<int32_t> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);  // '<i4' on x86/ARM LE
  return out;
}

}  // namespace mlasim::io
