// The kernel-under-test arena on the host (fuzz/kut_memory.h): a layout that replays the same
// way whatever the process mapped before, faults attributed to the buffer whose access the
// contract predicts even when the address lands in another buffer's unmapped pad, and a KV cache
// whose row -1 faults in sentinel mode too. Faults run in a forked child whose handler writes
// its `F {...}` line to a pipe.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/kut_memory.h"

namespace mlasim::fuzz {
namespace {

using nlohmann::json;

KutBufferSpec Spec(const std::string& name, int64_t bytes, int64_t row_bytes, bool before = false) {
  KutBufferSpec s;
  s.name = name;
  s.bytes = bytes;
  s.row_bytes = row_bytes;
  s.sentinel_rows = 8;
  s.guard_before = before;
  return s;
}

// Runs `touch` in a child with the fault handler installed; the line it wrote and its exit code.
struct Child {
  int exit_code = -1;
  json fault;
};
Child RunFaulting(const std::function<void()>& touch) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    RegisterHostFaultHandler(fds[1]);
    touch();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string line;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Child c;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (line.rfind("F ", 0) == 0) c.fault = json::parse(line.substr(2));
  return c;
}

int64_t Offset(const KutArena& a, const std::string& from, const std::string& to) {
  return static_cast<const unsigned char*>(a.Data(to)) -
         static_cast<const unsigned char*>(a.Data(from));
}

// The same buffers are placed at the same distances from each other, whatever the process maps
// meanwhile (here: a 3 MiB mapping made between the first buffer and the others of one arena;
// with a mapping per buffer it would sit between them).
TEST(KutArena, HostLayoutIsTheSameInEveryArena) {
  std::vector<void*> noise;
  auto place = [&noise](KutArena& a, bool map_between) {
    a.Add(Spec("q", 3 * 4096 + 8, 4096));
    if (map_between) {
      noise.push_back(::mmap(nullptr, 3 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      EXPECT_NE(noise.back(), MAP_FAILED);
    }
    a.Add(Spec("kv_indices", 40, 4));
    a.Add(Spec("kv_cache", 64 * 1152, 1152, true));
  };
  KutArena one(KutArena::Memory::kHost, false);
  place(one, false);
  KutArena two(KutArena::Memory::kHost, false);
  place(two, true);
  EXPECT_EQ(Offset(one, "q", "kv_indices"), Offset(two, "q", "kv_indices"));
  EXPECT_EQ(Offset(one, "q", "kv_cache"), Offset(two, "q", "kv_cache"));
  // 1 MiB unmapped pads on both sides of each buffer keep neighbours far apart
  EXPECT_GE(Offset(one, "q", "kv_indices"), int64_t{2} << 20);
  for (void* p : noise) ::munmap(p, 3 << 20);
}

// A read 2 MiB before kv_indices skips its own pad and lands in q's trailing one: without a
// prediction it is q's (after its end); with the contract's predicted rows it is kv_indices'.
TEST(KutArena, AFaultInsideAPredictedRangeIsThatBuffersWhereverItLands) {
  for (const bool predicted : {false, true}) {
    const Child c = RunFaulting([predicted] {
      KutArena a(KutArena::Memory::kHost, false);
      a.Add(Spec("q", 4096, 4096));
      auto* idx = static_cast<volatile int32_t*>(a.Add(Spec("kv_indices", 40, 4)));
      const int64_t row = -((int64_t{1} << 20) + 8192) / 4;  // past kv_indices' own pad
      std::vector<KutRowRange> expected;
      if (predicted) expected.push_back({"kv_indices", row - 10, -1});
      a.PublishForFaults(expected);
      (void)idx[row];
    });
    ASSERT_EQ(c.exit_code, kKutFaultExit) << predicted;
    ASSERT_TRUE(c.fault.is_object()) << predicted;
    EXPECT_EQ(c.fault["access"], "read");
    if (predicted) {
      EXPECT_EQ(c.fault["buffer"], "kv_indices");
      EXPECT_EQ(c.fault["side"], "before");
      EXPECT_EQ(c.fault["offset"], -((int64_t{1} << 20) + 8192));
    } else {
      EXPECT_EQ(c.fault["buffer"], "q");
      EXPECT_EQ(c.fault["side"], "after");
    }
  }
}

// The KV cache starts right after its unmapped pad in sentinel mode as in guard mode: a kernel
// that reads KV-cache row -1 (a -1 index used as a row) faults, where it used to read sentinel
// bytes unseen. Other buffers keep a head sentinel.
TEST(KutArena, SentinelModeKvCacheRowMinusOneFaults) {
  const Child c = RunFaulting([] {
    KutArena a(KutArena::Memory::kHost, false);
    auto* kv = static_cast<volatile uint16_t*>(a.Add(Spec("kv_cache", 4 * 64, 64, true)));
    a.Add(Spec("q", 128, 64));
    a.PublishForFaults();
    (void)kv[-32];  // row -1, column 0
  });
  ASSERT_EQ(c.exit_code, kKutFaultExit);
  EXPECT_EQ(c.fault["buffer"], "kv_cache");
  EXPECT_EQ(c.fault["side"], "before");
  EXPECT_EQ(c.fault["offset"], -64);
  EXPECT_EQ(c.fault["row_bytes"], 64);

  KutArena a(KutArena::Memory::kHost, false);
  auto* q = static_cast<unsigned char*>(a.Add(Spec("q", 128, 64)));
  q[-1] = 0;  // a head sentinel byte: damage, not a fault
  const std::vector<KutDamage> d = a.ScanAndRefill();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].before);
  EXPECT_EQ(d[0].first_row, -1);
  EXPECT_EQ(d[0].last_row, -1);
}

}  // namespace
}  // namespace mlasim::fuzz
