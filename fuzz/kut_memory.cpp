#include "fuzz/kut_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "kernels/gpu_api.h"

namespace mlasim::fuzz {
namespace {

int64_t PageBytes() {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  return page;
}
int64_t RoundUp(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// One period of the sentinel pattern (byte i depends on i & 0xFF only).
constexpr int64_t kPatternPeriod = 256;
const unsigned char* PatternPeriod() {
  static const auto period = [] {
    std::array<unsigned char, kPatternPeriod> a{};
    for (size_t i = 0; i < a.size(); ++i) a[i] = gpu::sentinel_byte(i);
    return a;
  }();
  return period.data();
}

void FillPattern(unsigned char* p, int64_t n) {
  for (int64_t i = 0; i < n; i += kPatternPeriod)
    std::memcpy(p + i, PatternPeriod(), static_cast<size_t>(std::min(kPatternPeriod, n - i)));
}

// Damage of a host sentinel region [p, p + n) as the first / last differing offsets and count:
// whole periods compared at once, bytes only inside a period that differs.
gpu::SentinelScan ScanHost(const unsigned char* p, int64_t n) {
  gpu::SentinelScan s{-1, -1, 0};
  for (int64_t i0 = 0; i0 < n; i0 += kPatternPeriod) {
    const int64_t len = std::min(kPatternPeriod, n - i0);
    if (std::memcmp(p + i0, PatternPeriod(), static_cast<size_t>(len)) == 0) continue;
    for (int64_t i = i0; i < i0 + len; ++i) {
      if (p[i] == PatternPeriod()[i - i0]) continue;
      if (s.bad_bytes == 0) s.first_bad_byte = i;
      s.last_bad_byte = i;
      ++s.bad_bytes;
    }
  }
  return s;
}

// ---- the fault handler's table (host buffers of the call in flight) -------------------------
struct FaultRange {
  uintptr_t lo = 0, hi = 0;      // the whole mapping, guard pages included (or an expected range)
  uintptr_t start = 0, end = 0;  // the buffer
  int64_t row_bytes = 1, rows = 0;
  char name[32] = {};
};
constexpr int kMaxFaultRanges = 64;
FaultRange g_ranges[kMaxFaultRanges];
std::atomic<int> g_range_count{0};
// The out-of-bounds rows the contract predicts for the call in flight, as address ranges: an
// address inside one is that buffer's access even when it lands in another buffer's guard page
// (a read far before or past a buffer skips its own guard).
FaultRange g_expected[kMaxFaultRanges];
std::atomic<int> g_expected_count{0};

// The range holding `a`: an expected range first, then a mapping, else the nearest mapping
// (*dist > 0). -1 when there is none.
const FaultRange* RangeOf(uintptr_t a, uintptr_t* dist) {
  *dist = 0;
  const int expected = g_expected_count.load();
  for (int i = 0; i < expected; ++i)
    if (a >= g_expected[i].lo && a < g_expected[i].hi) return &g_expected[i];
  const FaultRange* best = nullptr;
  uintptr_t best_dist = ~uintptr_t{0};
  const int count = g_range_count.load();
  for (int i = 0; i < count; ++i) {
    const FaultRange& r = g_ranges[i];
    const uintptr_t d = a < r.lo ? r.lo - a : a >= r.hi ? a - r.hi + 1 : 0;
    if (d < best_dist) best = &r, best_dist = d;
  }
  *dist = best_dist;
  return best;
}
int g_fault_fd = -1;

// Async-signal-safe formatting: append text / a signed decimal to a fixed buffer.
struct Line {
  char buf[512];
  size_t n = 0;
  void Add(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void Num(long long v) {
    char tmp[24];
    int k = 0;
    unsigned long long u = v < 0 ? 0ull - static_cast<unsigned long long>(v) : v;
    do {
      tmp[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) Add("-");
    while (k > 0 && n + 1 < sizeof buf) buf[n++] = tmp[--k];
  }
};

void OnFault(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  const char* access = "unknown";
#if defined(__x86_64__)
  if (uctx != nullptr) {
    const auto* uc = static_cast<const ucontext_t*>(uctx);
    access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
  }
#else
  (void)uctx;
#endif
  uintptr_t best_dist = 0;
  const FaultRange* best = RangeOf(a, &best_dist);
  Line l;
  l.Add("F {\"signal\":");
  l.Num(sig);
  l.Add(",\"access\":\"");
  l.Add(access);
  l.Add("\"");
  if (best != nullptr) {
    const FaultRange& r = *best;
    l.Add(",\"buffer\":\"");
    l.Add(r.name);
    l.Add("\",\"side\":\"");
    l.Add(best_dist != 0 ? "unknown" : a < r.start ? "before" : a >= r.end ? "after" : "inside");
    l.Add("\",\"offset\":");
    l.Num(a < r.start ? -static_cast<long long>(r.start - a) : static_cast<long long>(a - r.end));
    l.Add(",\"row_bytes\":");
    l.Num(r.row_bytes);
    l.Add(",\"rows\":");
    l.Num(r.rows);
  }
  l.Add("}\n");
  if (g_fault_fd >= 0) {
    size_t off = 0;
    while (off < l.n) {
      const ssize_t w = ::write(g_fault_fd, l.buf + off, l.n - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
  }
  ::_exit(kKutFaultExit);
}

}  // namespace

struct KutArena::Buffer {
  KutBufferSpec spec;
  unsigned char* data = nullptr;
  unsigned char* head = nullptr;  // sentinel region before the buffer
  int64_t head_bytes = 0;
  unsigned char* tail = nullptr;  // sentinel region after the buffer
  int64_t tail_bytes = 0;
  // host: the whole mapping; device: the allocation (or the guarded buffer's pointer)
  unsigned char* base = nullptr;
  int64_t mapped = 0;
  bool own_mapping = true;  // host: a mapping of its own (else a piece of the arena's reservation)
  bool device_guarded = false;
};

KutArena::KutArena(Memory memory, bool guard) : memory_(memory), guard_(guard) {}

KutArena::~KutArena() {
  for (auto& b : buffers_) {
    if (memory_ == Memory::kHost) {
      if (b->own_mapping) ::munmap(b->base, static_cast<size_t>(b->mapped));
      continue;
    }
    try {
      if (b->device_guarded)
        gpu::device_release_guarded(b->data);
      else
        gpu::device_release(b->base);
    } catch (...) {  // a destructor must not throw; after a device fault the worker ends anyway
    }
  }
  if (memory_ == Memory::kHost) {
    g_range_count = 0;
    g_expected_count = 0;
    if (reserve_ != nullptr) ::munmap(reserve_, static_cast<size_t>(reserve_bytes_));
  }
}

// Host placement. Each buffer gets a unit [pad][area][pad] of its own, pads unmapped and at
// least 1 MiB (or the area) wide, so an access a long way past a buffer still lands in that
// buffer's own unit. Units are cut, in order, from one address reservation per arena: their
// relative layout depends only on the buffers, not on what the process mapped before, so a fault
// (or its absence) replays the same way. When the reservation cannot be had or is full, the unit
// is a mapping of its own.
void KutArena::PlaceHost(Buffer& b, bool guard) {
  const KutBufferSpec& s = b.spec;
  const int64_t page = PageBytes();
  const int64_t sentinel = s.sentinel_rows * s.row_bytes;
  // sentinel mode: head and tail sentinels, except a `guard_before` buffer (the KV cache) which
  // starts right after its unmapped pad so that a read of row -1 faults in either mode
  const int64_t slack = guard ? 0 : s.guard_before ? sentinel : 2 * sentinel;
  const int64_t area = RoundUp(std::max<int64_t>(s.bytes + slack, 1), page);
  const int64_t pad = std::max<int64_t>(RoundUp(area, page), kHostPadBytes);
  b.mapped = pad + area + pad;
  b.base = ReserveHost(b.mapped, &b.own_mapping);
  unsigned char* lo = b.base + pad;
  if (::mprotect(lo, static_cast<size_t>(area), PROT_READ | PROT_WRITE) != 0) {
    if (b.own_mapping) ::munmap(b.base, static_cast<size_t>(b.mapped));
    throw std::runtime_error("mprotect of " + s.name + " failed");
  }
  if (s.guard_before)
    b.data = lo;
  else
    b.data = guard ? lo + area - s.bytes : lo + sentinel;
  b.head = lo;
  b.head_bytes = b.data - lo;
  b.tail = b.data + s.bytes;
  b.tail_bytes = (lo + area) - b.tail;
  FillPattern(b.head, b.head_bytes);
  FillPattern(b.tail, b.tail_bytes);
}

// `bytes` of PROT_NONE address space: the next piece of the arena's reservation, else (*own set)
// a mapping of its own. Throws std::runtime_error when neither can be had.
unsigned char* KutArena::ReserveHost(int64_t bytes, bool* own) {
  if (reserve_ == nullptr && !reserve_failed_) {
    void* m = ::mmap(nullptr, static_cast<size_t>(kHostReserveBytes), PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    reserve_failed_ = m == MAP_FAILED;
    if (!reserve_failed_)
      reserve_ = static_cast<unsigned char*>(m), reserve_bytes_ = kHostReserveBytes;
  }
  *own = reserve_ == nullptr || reserve_used_ + bytes > reserve_bytes_;
  if (!*own) {
    unsigned char* p = reserve_ + reserve_used_;
    reserve_used_ += bytes;
    return p;
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
  return static_cast<unsigned char*>(m);
}

void* KutArena::Add(const KutBufferSpec& s) {
  if (s.bytes < 0 || s.row_bytes < 1 || s.sentinel_rows < 0)
    throw std::invalid_argument("KutArena::Add: negative sizes for " + s.name);
  for (auto& b : buffers_)
    if (b->spec.name == s.name) throw std::invalid_argument("KutArena::Add: two buffers " + s.name);
  auto b = std::make_unique<Buffer>();
  b->spec = s;
  const int64_t sentinel = s.sentinel_rows * s.row_bytes;
  const bool guard = guard_ && s.guard;
  if (memory_ == Memory::kHost) {
    PlaceHost(*b, guard);
  } else if (guard && s.bytes > 0) {
    // A mapping of the worker's cache (gpu::device_acquire_guarded): no driver calls per call.
    const gpu::GuardedAllocation g = gpu::device_acquire_guarded(static_cast<size_t>(s.bytes));
    b->device_guarded = true;
    b->data = static_cast<unsigned char*>(g.ptr);
    const int64_t slack = static_cast<int64_t>(g.mapped_bytes - g.bytes);
    b->head_bytes = std::min(slack, sentinel);
    b->head = b->data - b->head_bytes;
    b->tail = b->data + s.bytes;
    gpu::fill_sentinel_async(b->head, static_cast<size_t>(b->head_bytes));
  } else {
    // A block of the worker's cache (gpu::device_acquire): no hipMalloc / hipFree per call.
    const int64_t total = std::max<int64_t>(2 * sentinel + s.bytes, 16);
    b->base = static_cast<unsigned char*>(gpu::device_acquire(static_cast<size_t>(total)));
    b->data = b->base + sentinel;
    b->head = b->base;
    b->head_bytes = sentinel;
    b->tail = b->data + s.bytes;
    b->tail_bytes = sentinel;
    gpu::fill_sentinel_async(b->head, static_cast<size_t>(b->head_bytes));
    gpu::fill_sentinel_async(b->tail, static_cast<size_t>(b->tail_bytes));
  }
  buffers_.push_back(std::move(b));
  return buffers_.back()->data;
}

KutArena::Buffer& KutArena::Find(const std::string& name) const {
  for (const auto& b : buffers_)
    if (b->spec.name == name) return *b;
  throw std::invalid_argument("KutArena: no buffer " + name);
}

void* KutArena::Data(const std::string& name) const {
  return Find(name).data;
}

void KutArena::Upload(const std::string& name, const void* src, size_t bytes) {
  Buffer& b = Find(name);
  bytes = std::min(bytes, static_cast<size_t>(b.spec.bytes));
  if (bytes == 0) return;
  if (memory_ == Memory::kHost)
    std::memcpy(b.data, src, bytes);
  else
    gpu::copy_to_device(b.data, src, bytes);
}

void KutArena::Fill(const std::string& name, unsigned char byte) {
  Buffer& b = Find(name);
  if (b.spec.bytes == 0) return;
  if (memory_ == Memory::kHost)
    std::memset(b.data, byte, static_cast<size_t>(b.spec.bytes));
  else
    gpu::device_fill_async(b.data, static_cast<size_t>(b.spec.bytes), byte);
}

void KutArena::Download(const std::string& name, void* dst, size_t bytes) const {
  const Buffer& b = Find(name);
  bytes = std::min(bytes, static_cast<size_t>(b.spec.bytes));
  if (bytes == 0) return;
  if (memory_ == Memory::kHost)
    std::memcpy(dst, b.data, bytes);
  else
    gpu::copy_to_host(dst, b.data, bytes);
}

std::vector<KutDamage> KutArena::ScanAndRefill() {
  // Every sentinel region, scanned in one pass (one batched launch on the device).
  struct Side {
    Buffer* b;
    bool before;
  };
  std::vector<Side> sides;
  std::vector<gpu::SentinelRegion> regions;
  for (auto& bp : buffers_)
    for (const bool before : {true, false}) {
      const int64_t n = before ? bp->head_bytes : bp->tail_bytes;
      if (n <= 0) continue;
      sides.push_back({bp.get(), before});
      regions.push_back({before ? bp->head : bp->tail, static_cast<size_t>(n)});
    }
  std::vector<gpu::SentinelScan> scans(regions.size());
  if (memory_ == Memory::kHost) {
    for (size_t i = 0; i < regions.size(); ++i)
      scans[i] = ScanHost(static_cast<unsigned char*>(regions[i].p),
                          static_cast<int64_t>(regions[i].bytes));
  } else if (!regions.empty()) {
    gpu::scan_sentinels(regions.data(), regions.size(), scans.data());
  }
  std::vector<KutDamage> out;
  for (size_t i = 0; i < sides.size(); ++i) {
    const gpu::SentinelScan& sc = scans[i];
    if (sc.bad_bytes == 0) continue;
    const Buffer& b = *sides[i].b;
    const int64_t rb = b.spec.row_bytes;
    auto* p = static_cast<unsigned char*>(regions[i].p);
    const auto n = static_cast<int64_t>(regions[i].bytes);
    // byte offsets from the buffer's start, then rows (floor for the bytes before it)
    const int64_t a = (p - b.data) + sc.first_bad_byte, z = (p - b.data) + sc.last_bad_byte;
    auto row = [rb](int64_t off) { return off >= 0 ? off / rb : -((-off + rb - 1) / rb); };
    out.push_back(
        KutDamage{b.spec.name, sides[i].before, b.spec.bytes / rb, row(a), row(z), sc.bad_bytes});
    if (memory_ == Memory::kHost)
      FillPattern(p, n);
    else
      gpu::fill_sentinel_async(p, static_cast<size_t>(n));
  }
  return out;
}

void KutArena::PublishForFaults(const std::vector<KutRowRange>& expected) const {
  if (memory_ != Memory::kHost) return;
  g_expected_count = 0;
  g_range_count = 0;
  int n = 0;
  for (const auto& b : buffers_) {
    if (n == kMaxFaultRanges) break;
    FaultRange& r = g_ranges[n++];
    r.lo = reinterpret_cast<uintptr_t>(b->base);
    r.hi = r.lo + static_cast<uintptr_t>(b->mapped);
    r.start = reinterpret_cast<uintptr_t>(b->data);
    r.end = r.start + static_cast<uintptr_t>(b->spec.bytes);
    r.row_bytes = b->spec.row_bytes;
    r.rows = b->spec.bytes / b->spec.row_bytes;
    std::strncpy(r.name, b->spec.name.c_str(), sizeof r.name - 1);
    r.name[sizeof r.name - 1] = '\0';
  }
  int e = 0;
  for (const KutRowRange& x : expected) {
    const FaultRange* owner = nullptr;
    for (int i = 0; i < n && owner == nullptr; ++i)
      if (x.buffer == g_ranges[i].name) owner = &g_ranges[i];
    if (owner == nullptr || e == kMaxFaultRanges || x.last_row < x.first_row) continue;
    FaultRange& r = g_expected[e++];
    r = *owner;
    const auto at = [&](int64_t row) {
      return owner->start + static_cast<uintptr_t>(row * owner->row_bytes);  // wraps for row < 0
    };
    r.lo = at(x.first_row);
    r.hi = at(x.last_row + 1);
  }
  g_expected_count = e;
  g_range_count = n;
}

void RegisterHostFaultHandler(int fd) {
  g_fault_fd = fd;
  static bool installed = false;
  if (installed) return;
  installed = true;
  // An alternate stack: a fault from a runaway recursion still reports.
  static std::vector<char> stack(1 << 16);
  stack_t ss{};
  ss.ss_sp = stack.data();
  ss.ss_size = stack.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = OnFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace mlasim::fuzz
