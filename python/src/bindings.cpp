// File: python/src/bindings.cpp — the C++ half of the `mlasim` Python package (module
// mlasim._core, pybind11). The Python half (python/mlasim/) converts torch tensors and other
// buffers to numpy arrays without copying (CPU) and wraps the results; this module checks every
// argument strictly (type, dtype, rank, contiguity, range) and raises TypeError / ValueError
// naming the argument, then runs the reference planner (ref/planner.h), the sizing
// (ref/sizing.h) and the plan checker (ref/plan_check.h) on the caller's memory.
//
// Copies: arrays are read in place through the buffer protocol (numpy); `plan` returns numpy
// arrays that own the planner's vectors (moved, not copied) or writes into the caller's arrays;
// `check_plan` copies the five buffers into a ref::Plan (the checker's input type) inside C++.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ref/limits.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "sim/call_check.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"
#include "tools/io/plan_buffers.h"
#include "tools/io/request_json.h"
#include "tools/mlasim/plan_input.h"

#ifndef MLASIM_VERSION
#define MLASIM_VERSION "0.0.0"
#endif

namespace py = pybind11;

namespace mlasim::python {
namespace {

using ref::PlanRequest;

// The planner's field names as the Python API names them (aiter's argument names).
std::string ArgName(const std::string& field, bool from_kv_lens) {
  const std::string base = field.substr(0, field.find_first_of(".["));
  const std::string rest = field.substr(base.size());
  if (base == "heads_per_head_k") return "num_heads_per_head_k" + rest;
  if (base == "batch_size") return from_kv_lens ? "kv_lens" : "kv_indptr";
  if (from_kv_lens && (base == "kv_indptr" || base == "kv_last_page_lens")) return "kv_lens";
  if (from_kv_lens && base == "qo_indptr") return "qlen";
  return field;
}

[[noreturn]] void ThrowValue(const std::string& arg, const std::string& reason) {
  throw py::value_error(arg + ": " + reason);
}
[[noreturn]] void ThrowType(const std::string& arg, const std::string& reason) {
  throw py::type_error(arg + ": " + reason);
}
void Raise(const Status& st, bool from_kv_lens) {
  if (!st.ok()) ThrowValue(ArgName(st.field(), from_kv_lens), st.message());
}

std::string TypeName(py::handle h) {
  return py::str(py::type::of(h).attr("__name__")).cast<std::string>();
}

// A Python int (or anything with __index__, e.g. numpy integers; not bool, not float) in
// [lo, hi].
int64_t Int(const std::string& arg, py::handle v, int64_t lo, int64_t hi) {
  if (py::isinstance<py::bool_>(v) || !PyIndex_Check(v.ptr()))
    ThrowType(arg, "expected an integer, got " + TypeName(v));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {  // e.g. a multi-element array, whose __index__ raises
    PyErr_Clear();
    ThrowType(arg, "expected an integer, got " + TypeName(v));
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow || x < lo || x > hi)
    ThrowValue(arg, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                        py::str(v).cast<std::string>());
  return x;
}

bool Bool(const std::string& arg, py::handle v) {
  if (!py::isinstance<py::bool_>(v)) ThrowType(arg, "expected True or False, got " + TypeName(v));
  return v.cast<bool>();
}

std::string Str(const std::string& arg, py::handle v) {
  if (!py::isinstance<py::str>(v)) ThrowType(arg, "expected a string, got " + TypeName(v));
  return v.cast<std::string>();
}

// dtype names: mlasim's (bf16, fp16, fp8, fp32) and torch's / numpy's names of the same types.
ref::DType DTypeArg(const std::string& arg, py::handle v) {
  static const std::map<std::string, ref::DType> kNames = {
      {"bf16", ref::DType::kBf16},         {"bfloat16", ref::DType::kBf16},
      {"fp16", ref::DType::kFp16},         {"float16", ref::DType::kFp16},
      {"half", ref::DType::kFp16},         {"fp8", ref::DType::kFp8},
      {"float8_e4m3fn", ref::DType::kFp8}, {"float8_e4m3fnuz", ref::DType::kFp8},
      {"float8_e5m2", ref::DType::kFp8},   {"float8_e5m2fnuz", ref::DType::kFp8},
      {"fp32", ref::DType::kFp32},         {"float32", ref::DType::kFp32},
      {"float", ref::DType::kFp32}};
  const std::string s = Str(arg, v);
  const auto it = kNames.find(s);
  if (it == kNames.end())
    ThrowValue(arg, "unknown dtype '" + s + "' (bf16, fp16, fp8, fp32 or torch's names)");
  return it->second;
}

// A numpy array of `dtype`, C-contiguous, native byte order, of one of the ranks in `ranks`.
py::array Array(const std::string& arg, py::handle v, const py::dtype& dtype,
                std::initializer_list<int> ranks, bool writable) {
  if (!py::isinstance<py::array>(v))
    ThrowType(arg, "expected a numpy array or a torch tensor, got " + TypeName(v));
  py::array a = py::reinterpret_borrow<py::array>(v);
  if (!a.dtype().is(dtype)) {
    // A byte-swapped int32 has int32's name: the type strings tell them apart ("dtype is int32,
    // expected int32" before).
    const std::string got = a.dtype().attr("name").cast<std::string>(),
                      want = dtype.attr("name").cast<std::string>();
    if (got == want)
      ThrowType(arg, "dtype is " + got + " stored as '" +
                         a.dtype().attr("str").cast<std::string>() + "', expected " + want +
                         " in native byte order ('" + dtype.attr("str").cast<std::string>() + "')");
    ThrowType(arg, "dtype is " + got + ", expected " + want);
  }
  bool rank_ok = false;
  for (int r : ranks) rank_ok = rank_ok || a.ndim() == r;
  if (!rank_ok)
    ThrowValue(arg, "has " + std::to_string(a.ndim()) + " dimensions, expected " +
                        std::to_string(*ranks.begin()) + (ranks.size() > 1 ? " or 2" : ""));
  if (!(a.flags() & py::array::c_style))
    ThrowValue(arg, "is not C-contiguous (aiter takes contiguous buffers; pass a contiguous copy)");
  if (writable && !a.writeable()) ThrowValue(arg, "is read-only; plan() writes into it");
  return a;
}

// The buffers a caller hands in, against the limit on the six buffers together
// (ref/limits.h plan_elements): the checker and planner copy them.
void CheckBufferTotal(const std::string& arg, const std::vector<int64_t>& sizes) {
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  const Status st = ref::TooLarge(arg, total, ref::LimitId::kPlanElements,
                                  "the plan buffers' int32 element count");
  if (total > ref::Limit(ref::LimitId::kPlanElements)) ThrowValue(arg, st.message());
}

io::Int32View View(const py::array& a) {
  return {static_cast<const int32_t*>(a.data()), static_cast<int64_t>(a.size())};
}

std::vector<int32_t> Int32Vector(const std::string& arg, py::handle v) {
  py::array a = Array(arg, v, py::dtype::of<int32_t>(), {1}, false);
  const int32_t* p = static_cast<const int32_t*>(a.data());
  return std::vector<int32_t>(p, p + a.size());
}

// A request built from keyword arguments, with mlasim plan's limits applied.
struct Request {
  PlanRequest request;
  bool from_kv_lens = false;
};

// kv_lens (tokens per request) -> kv_indptr in pages and last-page lengths, as `mlasim plan
// --kv-lens` does (tools/mlasim/plan_input.h RequestFromFlags).
void FromKvLens(const py::handle lens_obj, int32_t qlen, PlanRequest& r) {
  py::array lens = Array("kv_lens", lens_obj, py::dtype::of<int64_t>(), {1}, false);
  const int64_t* len = static_cast<const int64_t*>(lens.data());
  const int64_t batch = static_cast<int64_t>(lens.size());
  if (batch < 1) ThrowValue("kv_lens", "give at least one request's KV length in tokens");
  if (batch > (int64_t{1} << 20)) ThrowValue("kv_lens", "more than 2^20 requests (mlasim's limit)");
  const int64_t page = r.page_size;
  r.kv_indptr.assign(1, 0);
  int64_t total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    if (len[i] < 0 || len[i] > (int64_t{1} << 30))
      ThrowValue("kv_lens[" + std::to_string(i) + "]", "must be in 0..2^30 tokens");
    const int64_t pages = (len[i] + page - 1) / page;
    total += pages;
    if (total > (int64_t{1} << 30)) ThrowValue("kv_lens", "more than 2^30 KV pages in total");
    r.kv_indptr.push_back(static_cast<int32_t>(total));
    r.kv_last_page_lens.push_back(
        static_cast<int32_t>(len[i] == 0 ? page : len[i] - (pages - 1) * page));
  }
  if (int64_t{qlen} * batch > (int64_t{1} << 30)) ThrowValue("qlen", "qlen x requests above 2^30");
  for (int64_t i = 0; i <= batch; ++i) r.qo_indptr.push_back(static_cast<int32_t>(qlen * i));
}

py::handle Get(const py::dict& kw, const char* key) {
  return kw.contains(key) ? kw[key] : py::handle(Py_None);
}

void CheckKnownKeys(const py::dict& kw) {
  static const char* kKeys[] = {"kv_indptr",
                                "qo_indptr",
                                "kv_last_page_lens",
                                "kv_lens",
                                "qlen",
                                "num_heads_per_head_k",
                                "num_heads_k",
                                "is_causal",
                                "page_size",
                                "kv_granularity",
                                "max_seqlen_qo",
                                "uni_seqlen_qo",
                                "topk",
                                "max_split_per_batch",
                                "is_cp_round_robin",
                                "q_dtype",
                                "kv_dtype",
                                "target",
                                "cu_count",
                                "revision"};
  for (auto item : kw) {
    const std::string k = py::str(item.first).cast<std::string>();
    bool known = false;
    for (const char* key : kKeys) known = known || k == key;
    if (!known) ThrowType(k, "unknown argument");
  }
}

int64_t OptInt(const py::dict& kw, const char* key, int64_t lo, int64_t hi, int64_t dflt) {
  py::handle v = Get(kw, key);
  return v.is_none() ? dflt : Int(key, v, lo, hi);
}

bool OptBool(const py::dict& kw, const char* key, bool dflt) {
  py::handle v = Get(kw, key);
  return v.is_none() ? dflt : Bool(key, v);
}

// Target, revision, dtypes, heads, paging and split scalars (not the batch).
void ParseScalars(const py::dict& kw, PlanRequest& r) {
  py::handle target = Get(kw, "target");
  auto arch = ref::ParseArch(target.is_none() ? "gfx942" : Str("target", target), "target");
  Raise(arch.status(), false);
  r.target = *arch;
  if (!Get(kw, "revision").is_none()) {
    auto rev = ref::ParseRevision(Str("revision", Get(kw, "revision")), "revision");
    Raise(rev.status(), false);
    r.revision = *rev;
  }
  for (auto [key, dst] :
       {std::pair<const char*, ref::DType*>{"q_dtype", &r.q_dtype}, {"kv_dtype", &r.kv_dtype}})
    *dst = Get(kw, key).is_none() ? ref::DType::kBf16 : DTypeArg(key, Get(kw, key));
  const auto i32 = [&](const char* key, int64_t lo, int64_t dflt) {
    return static_cast<int32_t>(OptInt(kw, key, lo, INT32_MAX, dflt));
  };
  r.cu_count = i32("cu_count", 1, ref::GetTargetProfile(r.target).cu_count);
  r.heads_per_head_k = i32("num_heads_per_head_k", 1, 16);
  r.num_heads_k = i32("num_heads_k", 1, 1);
  r.page_size = i32("page_size", 1, 1);
  r.kv_granularity = i32("kv_granularity", 1, 16);
  r.topk = i32("topk", -1, -1);
  r.max_split_per_batch = i32("max_split_per_batch", -1, -1);
  if (r.max_split_per_batch == 0) ThrowValue("max_split_per_batch", "must be -1 (none) or >= 1");
  r.is_causal = OptBool(kw, "is_causal", true);
  r.is_cp_round_robin = OptBool(kw, "is_cp_round_robin", false);
}

// aiter's arrays: kv_indptr, qo_indptr (default qlen * i), kv_last_page_lens (default 1s).
void FromIndptrs(const py::dict& kw, PlanRequest& r) {
  if (Get(kw, "kv_indptr").is_none()) ThrowType("kv_indptr", "required (or give kv_lens)");
  r.kv_indptr = Int32Vector("kv_indptr", Get(kw, "kv_indptr"));
  if (r.kv_indptr.empty()) ThrowValue("kv_indptr", "needs B+1 >= 1 entries");
  const size_t batch = r.kv_indptr.size() - 1;
  if (Get(kw, "max_seqlen_qo").is_none())
    ThrowType("max_seqlen_qo",
              "required with kv_indptr (aiter's default -1, unknown, is not "
              "modelled)");
  r.max_seqlen_qo =
      static_cast<int32_t>(Int("max_seqlen_qo", Get(kw, "max_seqlen_qo"), 1, INT32_MAX));
  r.uni_seqlen_qo =
      static_cast<int32_t>(OptInt(kw, "uni_seqlen_qo", 1, INT32_MAX, r.max_seqlen_qo));
  r.qlen = static_cast<int32_t>(OptInt(kw, "qlen", 1, INT32_MAX, r.max_seqlen_qo));
  if (Get(kw, "qo_indptr").is_none()) {
    if (int64_t{r.qlen} * static_cast<int64_t>(batch) > (int64_t{1} << 30))
      ThrowValue("qlen", "qlen x requests is above 2^30 (the default qo_indptr)");
    for (size_t i = 0; i <= batch; ++i) r.qo_indptr.push_back(static_cast<int32_t>(i) * r.qlen);
  } else {
    r.qo_indptr = Int32Vector("qo_indptr", Get(kw, "qo_indptr"));
  }
  if (Get(kw, "kv_last_page_lens").is_none()) {
    if (r.page_size != 1)
      ThrowType("kv_last_page_lens", "required when page_size > 1 (tokens in each last page)");
    r.kv_last_page_lens.assign(batch, 1);
  } else {
    r.kv_last_page_lens = Int32Vector("kv_last_page_lens", Get(kw, "kv_last_page_lens"));
  }
  if (r.qo_indptr.size() != batch + 1)
    ThrowValue("qo_indptr", "has " + std::to_string(r.qo_indptr.size()) + " entries, kv_indptr " +
                                std::to_string(batch + 1));
  if (r.kv_last_page_lens.size() != batch)
    ThrowValue("kv_last_page_lens", "has " + std::to_string(r.kv_last_page_lens.size()) +
                                        " entries, expected " + std::to_string(batch) +
                                        " (one per request)");
}

Request MakeRequest(const py::dict& kw) {
  CheckKnownKeys(kw);
  Request out;
  PlanRequest& r = out.request;
  ParseScalars(kw, r);
  out.from_kv_lens = !Get(kw, "kv_lens").is_none();
  if (out.from_kv_lens) {
    for (const char* k : {"kv_indptr", "qo_indptr", "kv_last_page_lens"})
      if (!Get(kw, k).is_none()) ThrowType(k, "give either kv_lens or the indptr arrays, not both");
    r.qlen = static_cast<int32_t>(OptInt(kw, "qlen", 1, INT32_MAX, 1));
    const int32_t dflt = r.topk >= 0 ? 1 : r.qlen;  // sparse: aiter's max = uni = 1
    r.max_seqlen_qo = static_cast<int32_t>(OptInt(kw, "max_seqlen_qo", 1, INT32_MAX, dflt));
    r.uni_seqlen_qo =
        static_cast<int32_t>(OptInt(kw, "uni_seqlen_qo", 1, INT32_MAX, r.max_seqlen_qo));
    Raise(cli::CheckRequestLimits(r), false);  // page size and qlen bounds before FromKvLens
    FromKvLens(Get(kw, "kv_lens"), r.qlen, r);
  } else {
    FromIndptrs(kw, r);
  }
  Raise(cli::CheckRequestLimits(r), out.from_kv_lens);
  Raise(ref::ValidatePlanRequest(r), out.from_kv_lens);
  return out;
}

// Decisions and limits that need DecidePlan; returns the decisions.
ref::PlanDerived Decide(const Request& req, ref::PlannerChoice choice) {
  StatusOr<ref::PlanDerived> d = ref::DecidePlan(req.request, choice);
  Raise(d.status(), req.from_kv_lens);
  Raise(cli::CheckPlannerLimits(req.request, *d), req.from_kv_lens);
  return *d;
}

ref::PlannerChoice Choice(py::handle v) {
  auto c = cli::ParsePlannerChoice(Str("planner", v));
  if (!c.ok()) ThrowValue("planner", c.status().message());
  return *c;
}

py::dict SizesDict(const ref::MetadataSizes& s) {
  py::dict d;
  const nlohmann::json j = io::SizesToJson(s);
  for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = it.value().get<int64_t>();
  d["max_splits"] = s.max_splits;
  d["tile_cnt"] = s.tile_cnt;
  return d;
}

py::dict DerivedDict(const ref::PlanDerived& d) {
  py::dict out;
  for (const auto& [k, v] : io::DecisionValues(d)) out[py::str(k)] = v;
  out["qo_split"] = d.qo_split;
  out["parallel_planner_used"] = d.parallel_planner_used;
  out["sum_blocks"] = d.sum_blocks;
  out["ori_seqlen_qo"] = d.ori_seqlen_qo;
  out["num_tiles"] = d.num_tiles;
  return out;
}

// A numpy array owning `v` (moved, not copied), with `shape`.
template <typename T, typename A>
py::array Owning(std::vector<T, A>&& v, std::vector<py::ssize_t> shape) {
  auto* heap = new std::vector<T, A>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T, A>*>(p); });
  return py::array_t<T>(shape, heap->data(), owner);
}

struct BufferSlot {
  const char* name;
  ref::Int32Buffer ref::Plan::*member;
  int width;
};
constexpr BufferSlot kSlots[] = {{"work_indptr", &ref::Plan::work_indptr, 1},
                                 {"work_info", &ref::Plan::work_info, 8},
                                 {"reduce_indptr", &ref::Plan::reduce_indptr, 1},
                                 {"reduce_final_map", &ref::Plan::reduce_final_map, 2},
                                 {"reduce_partial_map", &ref::Plan::reduce_partial_map, 1}};

py::dict PlanResult(ref::Plan& plan) {
  py::dict out;
  out["derived"] = DerivedDict(plan.derived);
  out["sizes"] = SizesDict(plan.sizes);
  py::list iv;
  for (const ref::InputViolation& v : plan.input_violations)
    iv.append(py::dict(py::arg("array") = v.array, py::arg("index") = v.index,
                       py::arg("size") = v.size, py::arg("work_row") = v.work_row,
                       py::arg("field") = ref::WorkFieldName(v.work_field)));
  out["input_violations"] = iv;
  py::dict oob;
  for (const BufferSlot& s : kSlots) oob[s.name] = (plan.*(s.member)).oob_writes;
  out["stores_past_end"] = oob;
  return out;
}

// A fresh plan at get_mla_metadata_info_v1's sizes, returned as arrays owning its vectors.
py::dict PlanOwned(const Request& req, const ref::PlannerOptions& options) {
  StatusOr<ref::Plan> plan = [&] {
    py::gil_scoped_release release;
    return ref::PlanMlaMetadata(req.request, options);
  }();
  Raise(plan.status(), req.from_kv_lens);
  py::dict result = PlanResult(*plan);
  py::dict cells;
  for (const BufferSlot& s : kSlots) {
    ref::Int32Buffer& b = (*plan).*(s.member);
    const py::ssize_t n = static_cast<py::ssize_t>(b.size());
    std::vector<py::ssize_t> shape =
        s.width > 1 ? std::vector<py::ssize_t>{n / s.width, s.width} : std::vector<py::ssize_t>{n};
    std::vector<uint8_t> state(b.cells.size());
    std::memcpy(state.data(), b.cells.data(), b.cells.size());
    cells[s.name] = Owning(std::move(state), shape);
    result[s.name] = Owning(std::move(b.data), shape);
  }
  result["cells"] = cells;
  return result;
}

// Plans into the caller's arrays at their sizes, storing only the cells the planner writes.
py::dict PlanIntoCaller(const Request& req, const ref::PlannerOptions& options, const py::dict& out,
                        py::handle pointers) {
  std::vector<py::array> arrays;
  std::vector<int64_t> counts;
  for (const BufferSlot& s : kSlots) {
    const std::string arg = std::string("out.") + s.name;
    if (!out.contains(s.name)) ThrowType(arg, "missing");
    arrays.push_back(
        Array(arg, out[s.name], py::dtype::of<int32_t>(), {s.width > 1 ? 2 : 1}, true));
    if (s.width > 1 && arrays.back().shape(1) != s.width)
      ThrowValue(arg, "rows must hold " + std::to_string(s.width) + " int32");
    counts.push_back(static_cast<int64_t>(arrays.back().size()));
  }
  CheckBufferTotal("out", counts);  // also keeps every size below 2^31
  std::optional<py::array> ptr_array;
  if (out.contains("work_metadata_ptrs") && !out["work_metadata_ptrs"].is_none()) {
    ptr_array = Array("out.work_metadata_ptrs", out["work_metadata_ptrs"],
                      py::dtype::of<uint64_t>(), {1}, true);
    if (ptr_array->size() != 2) ThrowValue("out.work_metadata_ptrs", "must hold 2 entries");
  }
  ref::MetadataSizes sizes;
  sizes.work_indptr = static_cast<int32_t>(counts[0]);
  sizes.work_info_rows = static_cast<int32_t>(counts[1] / 8);
  sizes.reduce_indptr = static_cast<int32_t>(counts[2]);
  sizes.reduce_final_map_rows = static_cast<int32_t>(counts[3] / 2);
  sizes.reduce_partial_map = static_cast<int32_t>(counts[4]);
  sizes.max_splits = sizes.work_indptr - 1;
  sizes.tile_cnt = sizes.reduce_final_map_rows;
  StatusOr<ref::Plan> plan = ref::PlanMlaMetadataInto(req.request, sizes, options);
  Raise(plan.status(), req.from_kv_lens);
  for (size_t i = 0; i < 5; ++i) {
    const ref::Int32Buffer& b = (*plan).*(kSlots[i].member);
    int32_t* dst = static_cast<int32_t*>(arrays[i].mutable_data());
    for (size_t k = 0; k < b.data.size(); ++k)
      if (b.cells[k] != ref::Cell::kUnwritten) dst[k] = b.data[k];
  }
  if (ptr_array) {  // aiter stores &work_indptr[0], &work_info[0]
    const auto ptrs = pointers.cast<std::pair<uint64_t, uint64_t>>();
    static_cast<uint64_t*>(ptr_array->mutable_data())[0] = ptrs.first;
    static_cast<uint64_t*>(ptr_array->mutable_data())[1] = ptrs.second;
  }
  return PlanResult(*plan);
}

py::dict PlanBatch(const Request& req, py::handle planner, py::handle out, py::handle pointers) {
  const ref::PlannerChoice choice = Choice(planner);
  (void)Decide(req, choice);
  const ref::PlanRequest& r = req.request;
  StatusOr<ref::MetadataSizes> info =
      ref::GetMlaMetadataInfoV1(r, static_cast<int32_t>(r.kv_indptr.size()) - 1);
  Raise(info.status(), req.from_kv_lens);
  Raise(cli::CheckSizesLimit(*info), req.from_kv_lens);
  ref::PlannerOptions options;
  options.choice = choice;
  if (out.is_none()) return PlanOwned(req, options);
  return PlanIntoCaller(req, options, py::reinterpret_borrow<py::dict>(out), pointers);
}

py::list CheckPlan(const Request& req, py::handle planner, py::handle wi, py::handle winfo,
                   py::handle ri, py::handle rfm, py::handle rpm, py::handle unwritten) {
  const ref::PlannerChoice choice = Choice(planner);
  (void)Decide(req, choice);
  const py::dtype i32 = py::dtype::of<int32_t>();
  const py::array a[5] = {
      Array("work_indptr", wi, i32, {1}, false), Array("work_info", winfo, i32, {2}, false),
      Array("reduce_indptr", ri, i32, {1}, false), Array("reduce_final_map", rfm, i32, {2}, false),
      Array("reduce_partial_map", rpm, i32, {1}, false)};
  if (a[1].shape(1) != 8) ThrowValue("work_info", "rows must hold 8 int32 (MlaWorkInfo)");
  if (a[3].shape(1) != 2) ThrowValue("reduce_final_map", "rows must hold 2 int32");
  std::optional<int32_t> unwritten_value;
  if (!unwritten.is_none())
    unwritten_value = static_cast<int32_t>(Int("unwritten", unwritten, INT32_MIN, INT32_MAX));
  CheckBufferTotal("buffers", {static_cast<int64_t>(a[0].size()), static_cast<int64_t>(a[1].size()),
                               static_cast<int64_t>(a[2].size()), static_cast<int64_t>(a[3].size()),
                               static_cast<int64_t>(a[4].size())});
  const io::PlanBufferViews views{View(a[0]), View(a[1]), View(a[2]), View(a[3]), View(a[4])};
  ref::PlanCheckReport report;
  Status st;
  {
    py::gil_scoped_release release;
    StatusOr<ref::Plan> plan = io::PlanFromBuffers(req.request, views, unwritten_value, choice);
    if (plan.ok())
      report = ref::CheckPlan(req.request, *plan);
    else
      st = plan.status();
  }
  Raise(st, req.from_kv_lens);
  py::list out;
  for (const ref::PlanDiagnostic& d : report.diagnostics)
    out.append(py::make_tuple(ref::PlanDiagName(d.code),
                              d.severity == ref::Severity::kError ? "error" : "warning", d.buffer,
                              d.index, d.tile, d.work, d.message));
  return out;
}

py::dict PlannerConfig(const Request& req) {
  nlohmann::json j = io::PlanRequestToJson(req.request);
  for (const char* a : {"qo_indptr", "kv_indptr", "kv_last_page_lens"}) j.erase(a);
  py::dict d;
  for (auto& [k, v] : j.items()) {
    if (v.is_boolean())
      d[py::str(k)] = v.get<bool>();
    else if (v.is_number_integer())
      d[py::str(k)] = v.get<int64_t>();
    else
      d[py::str(k)] = v.get<std::string>();
  }
  return d;
}

// A kernel contract resolved once (mlasim.check_call caches it per (call kind, contract)).
struct ContractHandle {
  std::shared_ptr<const sim::Contract> contract;
};

// The CheckCall field as check_call's argument name: "tensors.q" -> "q".
std::string CallArg(const std::string& field) {
  return field.rfind("tensors.", 0) == 0 ? field.substr(8) : field;
}

ContractHandle LoadContract(const std::string& call, const std::string& kind,
                            const std::string& contract) {
  StatusOr<sim::CallKind> k = sim::CallKindOf(call, kind, kind.empty() ? "call" : "kind");
  if (!k.ok()) ThrowValue(k.status().field(), k.status().message());
  StatusOr<std::shared_ptr<const sim::Contract>> c =
      sim::ResolveCallContract(*k, contract, "contract");
  if (!c.ok()) ThrowValue("contract", c.status().message());
  return {*c};
}

// check_call's C++ half: `arrays` maps plan buffer / indptr names to int32 numpy arrays (read
// here, copied into the executor's plan), `tensors` is a list of (role, shape, itemsize) (shapes
// only: no tensor data is read). Returns one tuple per finding (buffer, access, rows, first_row,
// last_row, rows_past_end, rows_before_start, work_items, text).
// check_call(check_kv=True): the KV cache's extent ((shape, itemsize): rows are every dimension
// but the last) and kv_indices' values (flat int32), with the value that holds no entry.
void AddKvCache(py::handle kv_cache, py::handle kv_values, py::handle masked,
                sim::CallCheckInput& in) {
  if (kv_cache.is_none()) return;
  const py::tuple kv = py::reinterpret_borrow<py::tuple>(kv_cache);
  std::vector<int64_t> shape;
  for (py::handle d : kv[0]) shape.push_back(Int("kv_cache.shape", d, 0, INT64_MAX / 2));
  const int32_t itemsize = static_cast<int32_t>(Int("kv_cache.itemsize", kv[1], 1, 64));
  StatusOr<sim::CallTensor> t = sim::KvCacheTensor(shape, itemsize, "kv_cache");
  if (!t.ok()) ThrowValue("kv_cache", t.status().message());
  in.tensors.push_back(*t);
  py::array a = Array("kv_indices", kv_values, py::dtype::of<int32_t>(), {1}, false);
  if (a.size() > sim::kMaxCallBufferElements)
    ThrowValue("kv_indices", std::to_string(a.size()) + " elements (limit " +
                                 std::to_string(sim::kMaxCallBufferElements) + ")");
  const int32_t* p = static_cast<const int32_t*>(a.data());
  in.kv_indices_values.assign(p, p + a.size());
  if (!masked.is_none())
    in.kv_indices_masked = static_cast<int32_t>(Int("masked_index", masked, INT32_MIN, INT32_MAX));
}

py::list CheckCallPy(const ContractHandle& h, const std::string& call, py::dict arrays,
                     py::list tensors, py::handle fold, py::handle max_seqlen_q,
                     py::handle page_size, py::handle launch_grid, py::handle kv_cache,
                     py::handle kv_values, py::handle masked) {
  sim::CallCheckInput in;
  in.call = call;
  in.contract = h.contract;
  in.fold_ratio = static_cast<int32_t>(Int("fold_ratio", fold, 1, 1 << 16));
  in.max_seqlen_q = static_cast<int32_t>(Int("max_seqlen_q", max_seqlen_q, 1, 1 << 16));
  in.page_size = static_cast<int32_t>(Int("page_size", page_size, 1, 1 << 20));
  in.launch_grid = static_cast<int32_t>(Int("launch_grid", launch_grid, -1, INT32_MAX));
  const py::dtype i32 = py::dtype::of<int32_t>();
  const std::pair<const char*, std::vector<int32_t>*> slots[] = {
      {"work_indptr", &in.work_indptr},
      {"work_info", &in.work_info},
      {"reduce_indptr", &in.reduce_indptr},
      {"reduce_final_map", &in.reduce_final_map},
      {"reduce_partial_map", &in.reduce_partial_map},
      {"qo_indptr", &in.qo_indptr},
      {"kv_indptr", &in.kv_indptr},
      {"kv_last_page_lens", &in.kv_last_page_lens}};
  for (const auto& [name, vec] : slots) {
    if (!arrays.contains(name)) continue;
    const bool rows = std::string(name) == "work_info" || std::string(name) == "reduce_final_map";
    py::array a = Array(name, arrays[name], i32, {rows ? 2 : 1}, false);
    const int32_t width = std::string(name) == "work_info" ? 8 : 2;
    if (rows && a.shape(1) != width)
      ThrowValue(name, "rows must hold " + std::to_string(width) + " int32");
    if (a.size() > sim::kMaxCallBufferElements)
      ThrowValue(name, std::to_string(a.size()) + " elements (limit " +
                           std::to_string(sim::kMaxCallBufferElements) + ")");
    const int32_t* p = static_cast<const int32_t*>(a.data());
    vec->assign(p, p + a.size());
  }
  for (py::handle t : tensors) {
    const py::tuple tu = py::reinterpret_borrow<py::tuple>(t);
    const std::string role = tu[0].cast<std::string>();
    std::vector<int64_t> shape;
    for (py::handle d : tu[1]) shape.push_back(Int(role + ".shape", d, 0, INT64_MAX / 2));
    const int32_t itemsize = static_cast<int32_t>(Int(role + ".itemsize", tu[2], 1, 64));
    StatusOr<sim::CallTensor> ct =
        sim::CallTensorFromShape(role, shape, itemsize, in.fold_ratio, role);
    if (!ct.ok()) ThrowValue(role, ct.status().message());
    in.tensors.push_back(std::move(*ct));
  }
  AddKvCache(kv_cache, kv_values, masked, in);
  std::optional<StatusOr<std::vector<sim::Violation>>> v;
  {
    py::gil_scoped_release release;
    v.emplace(sim::CheckCall(in));
  }
  if (!v->ok()) ThrowValue(CallArg(v->status().field()), v->status().message());
  py::list out;
  for (const sim::Violation& x : **v)
    out.append(py::make_tuple(x.buffer, std::string(mlasim::sim::AccessName(x.access)), x.rows,
                              x.first_row, x.last_row, x.rows_past_end, x.rows_before_start,
                              x.work_items, sim::CallViolationText(call, *h.contract, x)));
  return out;
}

}  // namespace
}  // namespace mlasim::python

PYBIND11_MODULE(_core, m) {
  using namespace mlasim::python;
  namespace io = mlasim::io;
  m.doc() = "mlasim's reference planner, sizing and plan checker (C++); use the mlasim package";
  m.attr("__version__") = MLASIM_VERSION;
  // The size limits of every path (ref/limits.h): $MLASIM_LIMITS raises them as for the CLI.
  if (mlasim::Status st = mlasim::ref::SetLimitsFromEnvironment(); !st.ok())
    throw py::value_error(st.field() + ": " + st.message());
  m.attr("POISON") = mlasim::ref::Plan::kPoison;
  m.attr("CASE_FORMAT") = io::kCaseFormat;
  m.attr("CASE_SCHEMA_VERSION") = io::kCaseSchemaVersion;

  py::class_<Request>(m, "Request")
      .def("planner_config", &PlannerConfig,
           "get_mla_metadata_v1's scalar arguments in the case-manifest form (config.planner)")
      .def_property_readonly("kv_indptr", [](const Request& r) { return r.request.kv_indptr; })
      .def_property_readonly("qo_indptr", [](const Request& r) { return r.request.qo_indptr; })
      .def_property_readonly("kv_last_page_lens",
                             [](const Request& r) { return r.request.kv_last_page_lens; })
      .def_property_readonly("max_seqlen_qo",
                             [](const Request& r) { return r.request.max_seqlen_qo; })
      .def_property_readonly("page_size", [](const Request& r) { return r.request.page_size; })
      .def_property_readonly("topk", [](const Request& r) { return r.request.topk; })
      .def_property_readonly("batch_size", [](const Request& r) {
        return static_cast<int64_t>(r.request.kv_indptr.size()) - 1;
      });

  m.def(
      "make_request", [](py::kwargs kw) { return MakeRequest(kw); },
      "Build and validate a planner request (see mlasim.plan for the arguments)");
  m.def("plan", &PlanBatch, py::arg("request"), py::arg("planner"), py::arg("out"),
        py::arg("pointers"));
  m.def("check_plan", &CheckPlan, py::arg("request"), py::arg("planner"), py::arg("work_indptr"),
        py::arg("work_info"), py::arg("reduce_indptr"), py::arg("reduce_final_map"),
        py::arg("reduce_partial_map"), py::arg("unwritten"));
  py::class_<ContractHandle>(m, "Contract")
      .def_property_readonly("name", [](const ContractHandle& h) { return h.contract->name; })
      .def_property_readonly("variant", [](const ContractHandle& h) { return h.contract->variant; })
      .def_property_readonly("file", [](const ContractHandle& h) { return h.contract->file; })
      .def_property_readonly("kind", [](const ContractHandle& h) {
        return std::string(mlasim::sim::CallKindName(h.contract->call));
      });
  m.def("load_contract", &LoadContract, py::arg("call"), py::arg("kind"), py::arg("contract"));
  m.def("check_call", &CheckCallPy, py::arg("contract"), py::arg("call"), py::arg("arrays"),
        py::arg("tensors"), py::arg("fold_ratio"), py::arg("max_seqlen_q"), py::arg("page_size"),
        py::arg("launch_grid"), py::arg("kv_cache"), py::arg("kv_values"), py::arg("masked"));
  m.def("info_v1", [](const Request& req) {
    const auto& r = req.request;
    auto s = mlasim::ref::GetMlaMetadataInfoV1(r, static_cast<int32_t>(r.kv_indptr.size()) - 1);
    Raise(s.status(), req.from_kv_lens);
    return SizesDict(*s);
  });
  // The manifest a capture is about to write, read by the same parser `mlasim check` uses (and
  // its rule that a planner buffer is captured under one name only): ValueError with check's
  // message ("manifest.json:tensors.q.shape: ...").
  m.def("check_manifest", [](const std::string& text) {
    const io::MemoryCaseFiles no_files;  // names only: nothing is read
    auto manifest = io::ParseCaseManifest(text, io::kCaseManifestName);
    if (!manifest.ok()) throw py::value_error(manifest.status().ToString());
    for (const io::PlannerTensorName& n : io::PlannerTensorNames()) {
      auto t = io::FindPlannerTensor(*manifest, no_files, n.name);
      if (!t.ok()) throw py::value_error(t.status().ToString());
    }
  });
  m.def("dtype_table", [] {
    py::list out;
    for (const io::CaseDType& d : io::CaseDTypes())
      out.append(py::make_tuple(d.name, d.descr, d.itemsize));
    return out;
  });
  m.def("target_cu_count", [](const std::string& target) {
    auto a = mlasim::ref::ParseArch(target, "target");
    Raise(a.status(), false);
    return mlasim::ref::GetTargetProfile(*a).cu_count;
  });
}
