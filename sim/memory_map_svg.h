// File: sim/memory_map_svg.h
//
// The memory map around one out-of-bounds violation (docs/pictures.md): the simulated address
// space (sim/memory.h) from the start of the violating buffer on, as the call saw it: buffers,
// slack (mapped bytes no buffer holds), unmapped gaps (exact allocator: the guard page after each
// buffer; caching: the gap after a segment), the bad bytes (first..last row touched past the
// end) and what they land in (the violation's consequence: fault / corrupts:<buffer> /
// reads:<buffer> / unobserved). Region widths are logarithmic in their size (a 4 KiB guard page
// and a 2 MiB segment both stay readable); every region is labelled with its exact size.
#pragma once

#include <cstdint>
#include <string>

#include "sim/executor.h"
#include "sim/memory.h"
#include "sim/plan_svg.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace mlasim::sim {

// The address space as call `call` of `trace` sees it: the persistent buffers, then the transient
// ones of the latest decode call at or before it (live_before_call, then that call's transient
// tensors; only decode calls allocate, a reduce or index fill runs in its decode's space), placed
// in the order sim/executor.cpp places them, so the addresses equal the replay's (test
// ReportHtml.CallAddressSpaceEqualsTheReplayLayout). Errors: none; MLASIM_ASSERTs
// 0 <= call < trace.calls.size().
AddressSpace CallAddressSpace(const Scenario& s, const Trace& trace, int32_t call);

// At most this many regions are drawn after the violating buffer; the picture says when the
// bad bytes reach further.
inline constexpr int32_t kMaxMapRegions = 12;

// The map of `v` (an out-of-bounds violation) over `as`. Regions carry classes: one
// `<rect class="region buffer|slack|unmapped">` each, the bad bytes one `<rect class="overrun">`.
// A violation whose buffer `as` does not hold, or whose rows are not past its end, gives a
// picture with one line saying so. Deterministic bytes.
SvgPicture MemoryMap(const AddressSpace& as, const Violation& v);
std::string MemoryMapInline(const AddressSpace& as, const Violation& v);

}  // namespace mlasim::sim
