// libFuzzer harness: a kernel under test's description (fuzz/kut_library.h, docs/kut.md), both
// places it comes in:
//  - what the library's mlasim_kut_describe writes (DescriptionFromInfo): the numbers of
//    mlasim_kut_info and its contract references, inline JSON text or "builtin:VARIANT" (file
//    references are left out: the harness reads no files);
//  - the description a worker process sends its campaign (KutDescription::FromJson on the
//    worker's "D" line, read strictly as fuzz/kut_pool.cpp reads it), which must round-trip.
// Input: byte 0 picks the form (even: info, odd: the worker's JSON); for the info, 64 bytes of
// its numbers, then the name, the decode and the reduce contract separated by NUL bytes.
// Seeds: tests/fuzz/corpus/kut_description/ (docs/kut.md's CPU kernel, inline and built-in
// contracts, and its worker line).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/kut_library.h"
#include "sim/json_input.h"

namespace {

// Splits at NUL bytes.
std::vector<std::string> Fields(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i)
    if (data[i] == 0)
      out.emplace_back();
    else
      out.back().push_back(static_cast<char>(data[i]));
  return out;
}

// A reference as the library would pass it, without file paths (NULL: the built-in default).
const char* Reference(const std::vector<std::string>& f, size_t i) {
  if (i >= f.size()) return nullptr;
  const std::string& r = f[i];
  const size_t first = r.find_first_not_of(" \t\r\n");
  if (r.rfind("builtin:", 0) == 0 || (first != std::string::npos && r[first] == '{'))
    return r.c_str();
  return nullptr;
}

void FromInfo(const uint8_t* data, size_t size) {
  mlasim_kut_info info{};
  int32_t v[16] = {};
  std::memcpy(v, data, std::min(size, sizeof v));
  info.abi_version = MLASIM_KUT_ABI_VERSION;
  info.struct_bytes = sizeof info;
  info.ops = static_cast<uint32_t>(v[0]);
  info.memory = v[1];
  info.q_dtypes = static_cast<uint32_t>(v[2]);
  info.kv_dtypes = static_cast<uint32_t>(v[3]);
  info.o_dtypes = static_cast<uint32_t>(v[4]);
  info.heads_multiple = v[5];
  info.max_heads = v[6];
  info.head_dim_qk_multiple = v[7];
  info.max_head_dim_qk = v[8];
  info.head_dim_v_multiple = v[9];
  info.max_head_dim_v = v[10];
  info.max_page_size = v[11];
  info.dense = v[12];
  info.sparse = v[13];
  info.page_size_multiple = v[14];
  const std::vector<std::string> f =
      size > sizeof v ? Fields(data + sizeof v, size - sizeof v) : std::vector<std::string>();
  info.name = f.empty() ? nullptr : f[0].c_str();
  info.decode_contract = Reference(f, 1);
  info.reduce_contract = Reference(f, 2);
  auto d = mlasim::fuzz::DescriptionFromInfo(info, "libkut.so", "", "/nonexistent");
  if (!d.ok()) return;
  (void)d->Limits();
  for (int32_t op : {MLASIM_KUT_OP_DECODE, MLASIM_KUT_OP_REDUCE})
    for (bool sparse : {false, true})
      (void)d->Unsupported(op, v[15] & 0xffff, 576, 512, (v[15] >> 16) & 0xffff, sparse);
  // What the worker would send its campaign, read back.
  auto back = mlasim::fuzz::KutDescription::FromJson(d->ToJson());
  if (!back.ok() || back->ToJson() != d->ToJson()) __builtin_trap();  // not a round trip
}

void FromWorker(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  auto j = mlasim::sim::ParseJsonStrict(line, "worker");  // as fuzz/kut_pool.cpp reads it
  if (!j.ok()) return;
  auto d = mlasim::fuzz::KutDescription::FromJson(*j);
  if (!d.ok()) return;
  (void)d->Limits();
  auto back = mlasim::fuzz::KutDescription::FromJson(d->ToJson());
  if (!back.ok() || back->ToJson() != d->ToJson()) __builtin_trap();  // not a round trip
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    FromInfo(data + 1, size - 1);
  else
    FromWorker(data + 1, size - 1);
  return 0;
}
