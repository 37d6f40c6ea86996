// File: fuzz/kut_memory.h
//
// The buffers one kernel-under-test call receives (docs/kernel-under-test.md, "Buffers"): each lives alone,
// with sentinel bytes before and after it (byte i of a sentinel region = 0xA5 ^ (i & 0xFF),
// gpu::sentinel_byte) or, in guard mode, at the edge of an unmapped page so that an access past
// it faults. Host memory (a CPU kernel) or device memory (kernels/gpu_api.h).
//
// Host layout of one buffer: [unmapped pad][head sentinel][buffer][tail sentinel][unmapped pad]
// in sentinel mode (a `guard_before` buffer, the KV cache, has no head sentinel: it starts at its
// pad), so an access far past the sentinels faults instead of corrupting the heap; in guard mode
// the buffer ends at its trailing pad (or, for `guard_before` buffers, starts right after its
// leading one) and the slack on the other side holds sentinel bytes. Pads are at least 1 MiB and
// the units are cut in order from one address reservation per arena, so the layout replays.
// Device: sentinel mode allocates head + buffer + tail; guard mode places the buffer at the end
// of a guarded mapping (gpu::device_alloc_guarded), so only accesses past the end fault there.
//
// A host fault is attributed by the address the kernel touched: RegisterHostFaultHandler()
// installs a SIGSEGV / SIGBUS handler that finds the buffer whose predicted out-of-bounds rows,
// else whose unit, holds the address and writes one line `F {json}` to a file descriptor, then
// ends the process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlasim::fuzz {

struct KutBufferSpec {
  std::string name;           // "q", "o", "kv_cache", ...
  int64_t bytes = 0;          // the buffer the kernel receives
  int64_t row_bytes = 1;      // damage is reported in rows of this size
  int64_t sentinel_rows = 8;  // sentinel rows before and after (sentinel mode)
  bool guard_before = false;  // guard mode: unmapped page right before the buffer instead of after
  bool guard = true;          // guard mode: this buffer is guarded (else it gets sentinel bytes)
};

// A sentinel region that no longer holds its pattern, in rows from the buffer's start: the rows
// before it are negative (-1 = the row right before), those after it are >= rows.
struct KutDamage {
  std::string buffer;
  bool before = false;
  int64_t rows = 0;  // rows the buffer holds (bytes / row_bytes)
  int64_t first_row = 0, last_row = 0;
  int64_t bad_bytes = 0;
};

// Rows [first_row, last_row] (inclusive, from the buffer's start; negative: before it).
struct KutRowRange {
  std::string buffer;
  int64_t first_row = 0, last_row = 0;
};

class KutArena {
 public:
  enum class Memory { kHost, kDevice };
  // Device memory needs a GPU build with a device (kernels/gpu_api.h); errors of the device
  // calls throw std::runtime_error.
  KutArena(Memory memory, bool guard);
  ~KutArena();
  KutArena(const KutArena&) = delete;
  KutArena& operator=(const KutArena&) = delete;

  // Allocates a buffer; returns the pointer the kernel receives (never null, also for 0 bytes).
  // Throws std::runtime_error when memory cannot be had, std::invalid_argument for a name used
  // twice or negative sizes.
  void* Add(const KutBufferSpec& spec);
  void* Data(const std::string& name) const;
  // Copies `bytes` bytes (at most the buffer's) from host memory into the buffer, from its start.
  void Upload(const std::string& name, const void* src, size_t bytes);
  void Fill(const std::string& name, unsigned char byte);  // every byte of the buffer
  void Download(const std::string& name, void* dst, size_t bytes) const;
  // Damaged sentinel regions since the last scan (buffer order), refilled afterwards so that the
  // next call's damage is its own.
  std::vector<KutDamage> ScanAndRefill();
  // Host arenas: makes these buffers the ones the fault handler attributes faults to, and
  // `expected` (the out-of-bounds rows the call's contract predicts, rows from each buffer's
  // start) the ranges it checks first: a predicted access far outside its buffer is attributed to
  // that buffer, wherever it lands. Ranges naming no buffer of the arena are ignored.
  void PublishForFaults(const std::vector<KutRowRange>& expected = {}) const;
  bool guard() const { return guard_; }
  Memory memory() const { return memory_; }

 private:
  struct Buffer;
  Buffer& Find(const std::string& name) const;
  void PlaceHost(Buffer& b, bool guard);
  unsigned char* ReserveHost(int64_t bytes, bool* own);
  static constexpr int64_t kHostReserveBytes = int64_t{1} << 36;  // 64 GiB of address space
  static constexpr int64_t kHostPadBytes = int64_t{1} << 20;      // unmapped, around each buffer
  Memory memory_;
  bool guard_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  unsigned char* reserve_ = nullptr;  // host: the arena's address reservation
  int64_t reserve_bytes_ = 0, reserve_used_ = 0;
  bool reserve_failed_ = false;
};

// Installs (once per process) the SIGSEGV / SIGBUS handler of host guard and sentinel mode. On a
// fault it writes `F {"buffer": NAME, "side": "before"|"after"|"inside"|"unknown", "offset":
// bytes from the buffer's start (before: negative) or end (after), "row_bytes": N, "rows": N,
// "access": "read"|"write"|"unknown"}` and a newline to `fd`, then _exit(kKutFaultExit).
void RegisterHostFaultHandler(int fd);
inline constexpr int kKutFaultExit = 86;

}  // namespace mlasim::fuzz
