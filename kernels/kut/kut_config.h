// kernels/kut/kut_config.h - the one parser of a kernel under test's configuration text
// (--kernel-config, mlasim_kut_call::config), shared by mlasim's CPU kernel (cpu_kernel.h), its
// GPU kernel (gpu_kut.hip) and the aiter adapter (aiter_kut.cpp). Each kernel gives its keys as
// data (ConfigKey: the words a key takes, or a decimal integer range) and gets one value per key.
//
// Text: "" (every key at its default) or "key=value[,key=value...]", each key at most once. Refused,
// with a reason naming the key: an empty item (a leading, trailing or doubled comma), an item
// without '=', a key the kernel does not have, a key given twice (which value would win is a
// guess), a word the key does not take, and an integer that is not decimal digits (a sign,
// spaces, "0x", "1e0", "3.0") or outside its range (leading zeros are decimal: "06" is 6).
//
// Header-only and self-contained (<string>, <vector>, <cstdint>): host C++, nvcc and HIP compile it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlasim::kut_config {

// One key of a kernel's configuration: `words` non-empty: the value is one of them (the parsed
// value is its index; default `fallback`, an index); `words` empty: a decimal integer in
// [min, max] (default `fallback`).
struct ConfigKey {
  const char* name;
  std::vector<const char*> words;
  int64_t min = 0, max = 0;
  int64_t fallback = 0;
  const char* note = "";  // appended to a value's error: why the key takes only these values
};

// "variant=asm|opus|hk[,tiling=0..10]": the keys and what each takes, for messages.
inline std::string Usage(const std::vector<ConfigKey>& keys) {
  std::string out;
  for (size_t k = 0; k < keys.size(); ++k) {
    std::string v;
    for (size_t w = 0; w < keys[k].words.size(); ++w)
      v += (w ? "|" : "") + std::string(keys[k].words[w]);
    if (keys[k].words.empty()) v = std::to_string(keys[k].min) + ".." + std::to_string(keys[k].max);
    out += k == 0 ? std::string(keys[k].name) + "=" + v
                  : "[," + std::string(keys[k].name) + "=" + v + "]";
  }
  return out;
}

// What `key` takes, for messages: "variant is asm, opus or hk", "tiling is 0 to 10", and its note.
inline std::string Takes(const ConfigKey& key) {
  std::string out = std::string(key.name) + " is ";
  for (size_t w = 0; w < key.words.size(); ++w)
    out += (w == 0 ? "" : w + 1 == key.words.size() ? " or " : ", ") + std::string(key.words[w]);
  if (key.words.empty()) out += std::to_string(key.min) + " to " + std::to_string(key.max);
  return key.note[0] ? out + ": " + key.note : out;
}

// The value `text` of `key` into *value (a word's index or the integer). False with `why` set
// (the reason, then the whole config `all` and what the key takes).
inline bool ParseValue(const ConfigKey& key, const std::string& text, const std::string& all,
                       int64_t* value, std::string* why) {
  const std::string tail = " (got '" + all + "'; " + Takes(key) + ")";
  if (!key.words.empty()) {
    for (size_t w = 0; w < key.words.size(); ++w)
      if (text == key.words[w]) return *value = static_cast<int64_t>(w), true;
    *why = "unknown " + std::string(key.name) + " '" + text + "'" + tail;
    return false;
  }
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    *why = std::string(key.name) + " '" + text + "' is not a decimal integer" + tail;
    return false;
  }
  int64_t v = 0;
  bool above = false;
  for (char c : text) {
    const int d = c - '0';
    if (d > key.max || v > (key.max - d) / 10) {  // v * 10 + d would pass max (or overflow)
      above = true;
      break;
    }
    v = v * 10 + d;
  }
  if (above || v < key.min) {
    *why = std::string(key.name) + " " + text + " is out of range" + tail;
    return false;
  }
  *value = v;
  return true;
}

// Parses `text` against `keys` into *values (one per key, in the order of `keys`; a key not given
// keeps its fallback). False with `why` set (the reason, the key it concerns, the text and, for an
// item that names no key, the usage) for anything the header comment refuses; *values is then
// unspecified.
inline bool Parse(const char* text, const std::vector<ConfigKey>& keys,
                  std::vector<int64_t>* values, std::string* why) {
  const std::string t = text ? text : "";
  values->clear();
  for (const ConfigKey& k : keys) values->push_back(k.fallback);
  if (t.empty()) return true;
  std::vector<bool> seen(keys.size(), false);
  for (size_t at = 0; at <= t.size();) {  // <=: a trailing comma leaves one empty item
    const size_t end = t.find(',', at) == std::string::npos ? t.size() : t.find(',', at);
    const std::string item = t.substr(at, end - at);
    at = end + 1;
    const size_t eq = item.find('=');
    size_t k = 0;
    while (eq != std::string::npos && k < keys.size() && item.compare(0, eq, keys[k].name) != 0)
      ++k;
    if (item.empty() || eq == std::string::npos || k == keys.size()) {
      *why = (item.empty() ? std::string("empty item: a leading, trailing or doubled comma")
              : eq == std::string::npos ? "'" + item + "' is not key=value"
                                        : "unknown key '" + item.substr(0, eq) + "'") +
             " (got '" + t + "'; config is " + Usage(keys) + ")";
      return false;
    }
    if (seen[k]) {
      *why = std::string(keys[k].name) + " given twice (got '" + t + "'; each key at most once)";
      return false;
    }
    seen[k] = true;
    if (!ParseValue(keys[k], item.substr(eq + 1), t, &(*values)[k], why)) return false;
  }
  return true;
}

// ---- the keys of mlasim's kernels, in one place ------------------------------------------------

// mlasim's CPU kernel (cpu_kernel.h): variant (the zero-KV behaviour and the built-in decode
// contract it follows) and order (workgroups first to last, or last first).
inline const std::vector<ConfigKey>& CpuKeys() {
  static const std::vector<ConfigKey> keys = {{"variant", {"asm", "opus", "hk", "self"}},
                                              {"order", {"forward", "reverse"}}};
  return keys;
}
enum CpuKey { kCpuVariant, kCpuOrder };

// mlasim's GPU kernels (gpu_kut.hip): variant and tiling (DecodeOptions::tiling, 0 = automatic).
inline const std::vector<ConfigKey>& GpuKeys() {
  static const std::vector<ConfigKey> keys = {{"variant", {"asm", "opus", "hk"}},
                                              {"tiling", {}, 0, 10, 0}};
  return keys;
}
enum GpuKey { kGpuVariant, kGpuTiling };

// The aiter adapter (aiter_kut.cpp): variant (asm only: the stage-1 kernel it calls) and heads
// (16: the shape aiter/mla.py passes to stage 1; any: multiples of 8 up to 128).
inline const std::vector<ConfigKey>& AiterKeys() {
  static const std::vector<ConfigKey> keys = {
      {"variant", {"asm"}, 0, 0, 0, "the only stage-1 kernel this adapter calls"},
      {"heads", {"16", "any"}}};
  return keys;
}
enum AiterKey { kAiterVariant, kAiterHeads };

}  // namespace mlasim::kut_config
