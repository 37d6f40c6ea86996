#include "sim/contract.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>

#include "ref/limits.h"
#include "sim/flat.h"
#include "sim/json_input.h"

namespace mlasim::sim {

// Generated from sim/contracts/*.json by CMake (cmake/EmbedJson.cmake).
struct EmbeddedContract {
  const char* file;
  const char* text;
};
extern const EmbeddedContract kEmbeddedContracts[];
extern const int kEmbeddedContractsCount;

namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Names <-> enums: one table each, used by the parser and by every printer.
// ---------------------------------------------------------------------------------------------
template <class E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<CallKind> kCallKinds[] = {{CallKind::kPlanBuild, "plan_build"},
                                          {CallKind::kPlanUpdate, "plan_update"},
                                          {CallKind::kIndexFill, "index_fill"},
                                          {CallKind::kDecode, "decode"},
                                          {CallKind::kReduce, "reduce"}};
constexpr Named<ZeroKv> kZeroKv[] = {{ZeroKv::kReadsQWritesOutput, "reads_q_writes_output"},
                                     {ZeroKv::kReadsQOnly, "reads_q_only"},
                                     {ZeroKv::kSkips, "skips"}};
constexpr Named<MaskedKeys> kMaskedKeys[] = {{MaskedKeys::kNeverRead, "never_read"},
                                             {MaskedKeys::kReadThenMask, "read_then_mask"}};
constexpr Named<InvalidIndex> kInvalidIndex[] = {{InvalidIndex::kFault, "fault"},
                                                 {InvalidIndex::kClampToZero, "clamp_to_zero"},
                                                 {InvalidIndex::kWrap, "wrap"},
                                                 {InvalidIndex::kMasked, "masked"},
                                                 {InvalidIndex::kMinusOneMasked, "minus_one_masked"}};
constexpr Named<EmptyRows> kEmptyRows[] = {{EmptyRows::kZeroAndNegInfLse, "zero_and_neg_inf_lse"},
                                           {EmptyRows::kNan, "nan"},
                                           {EmptyRows::kUnwritten, "unwritten"},
                                           {EmptyRows::kZeroAndPosInfLse, "zero_and_pos_inf_lse"}};
constexpr Named<AccessUnit> kUnits[] = {{AccessUnit::kRows, "rows"},
                                        {AccessUnit::kHeadRows, "head_rows"},
                                        {AccessUnit::kElements, "elements"},
                                        {AccessUnit::kBytes, "bytes"}};
constexpr Named<LoopAttribution> kAttributions[] = {{LoopAttribution::kNone, "none"},
                                                {LoopAttribution::kWorkgroup, "workgroup"},
                                                {LoopAttribution::kWorkItem, "work_item"},
                                                {LoopAttribution::kTile, "tile"}};
constexpr const char* kLaunchVarNames[kLaunchVarCount] = {
    "grid",          "clusters",          "works",
    "heads",         "fold",              "max_seqlen_q",
    "page_size",     "q_rows",            "o_rows",
    "partial_rows",  "index_rows",        "kv_cache_rows",
    "tokens",        "captured_grid",     "work_indptr_rows",
    "work_info_rows", "reduce_indptr_rows", "reduce_final_map_rows",
    "reduce_partial_map_rows", "batch"};

template <class E, size_t N>
const char* NameOf(const Named<E> (&table)[N], E v) {
  for (const Named<E>& n : table)
    if (n.value == v) return n.name;
  return "?";
}

template <class E, size_t N>
StatusOr<E> Parse(const Named<E> (&table)[N], const std::string& s, const std::string& field) {
  std::string known;
  for (const Named<E>& n : table) {
    if (s == n.name) return n.value;
    known += std::string(known.empty() ? "" : ", ") + n.name;
  }
  return InvalidArgumentError(field, "must be one of " + known + " (got \"" + s + "\")");
}

// A name a program may declare (a loop variable, a let, a constant): letters, digits and _, not
// starting with a digit.
bool IsDeclarableName(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char ch) {
           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
         });
}

// The loadable int32 buffers of each call kind (expr.h loads): name, row width, field names.
const std::vector<std::pair<LoadSlot, LoadableBuffer>>& Loadables(CallKind call) {
  static const std::vector<std::string> kWorkFields = {"batch_idx", "partial_qo_loc", "qo_start",
                                                       "qo_end",    "kv_start",       "kv_end",
                                                       "kv_offset", "pad"};
  static const std::vector<std::pair<LoadSlot, LoadableBuffer>> kDecode = {
      {kLoadWorkIndptr, {"work_indptr", 1, {}}},
      {kLoadWorkInfo, {"work_info", 8, kWorkFields}},
      {kLoadQoIndptr, {"qo_indptr", 1, {}}},
      {kLoadKvIndptr, {"kv_indptr", 1, {}}},
      {kLoadKvLastPageLens, {"kv_last_page_lens", 1, {}}},
      {kLoadKvIndices, {"kv_indices", 1, {}}}};
  static const std::vector<std::pair<LoadSlot, LoadableBuffer>> kReduce = {
      {kLoadReduceIndptr, {"reduce_indptr", 1, {}}},
      {kLoadReduceFinalMap, {"reduce_final_map", 2, {"q_start", "q_end"}}},
      {kLoadReducePartialMap, {"reduce_partial_map", 1, {}}}};
  static const std::vector<std::pair<LoadSlot, LoadableBuffer>> kFill = {
      {kLoadIndptr, {"indptr", 1, {}}}};
  static const std::vector<std::pair<LoadSlot, LoadableBuffer>> kNone = {};
  switch (call) {
    case CallKind::kDecode: return kDecode;
    case CallKind::kReduce: return kReduce;
    case CallKind::kIndexFill: return kFill;
    default: return kNone;
  }
}

// Objects merge key by key; anything else in `over` replaces.
void Merge(json* base, const json& over) {
  if (!base->is_object() || !over.is_object()) {
    *base = over;
    return;
  }
  for (auto it = over.begin(); it != over.end(); ++it) {
    if (base->contains(it.key()))
      Merge(&(*base)[it.key()], it.value());
    else
      (*base)[it.key()] = it.value();
  }
}

// Affine forms over the elements a CSR walk loads per iteration (CsrWalk): coef . values +
// constant, with small coefficients and constant so that every value is exact in 64 bits.
struct Affine {
  int64_t coef[2] = {0, 0};
  int64_t constant = 0;
};

// Recognises a CSR walk in a loop's body (CsrWalk): its lets, then its last statement's gate.
class CsrFinder {
 public:
  explicit CsrFinder(const Statement& loop) : loop_(loop) {}

  bool Find(CsrWalk* out) {
    const std::vector<Statement>& body = loop_.body;
    if (body.empty()) return false;
    for (size_t i = 0; i + 1 < body.size(); ++i) {
      const Statement& st = body[i];
      Affine a;
      if (st.kind != Statement::Kind::kLet || !st.when.empty() || !Of(st.value, &a)) return false;
      lets_[st.slot] = a;
    }
    Affine gate;
    if (!Gate(body.back(), &gate) || w_.loads == 0 || (gate.coef[0] == 0 && gate.coef[1] == 0))
      return false;
    w_.coef[0] = gate.coef[0];
    w_.coef[1] = gate.coef[1];
    w_.constant = gate.constant;
    *out = w_;
    return true;
  }

 private:
  static constexpr int64_t kMaxCoef = 4, kMaxConstant = int64_t{1} << 40;

  // The gate of the last statement: it does something only when gate > 0.
  bool Gate(const Statement& st, Affine* gate) {
    if (!st.when.empty()) return false;
    Affine a, b;
    if (st.kind == Statement::Kind::kLoop)  // runs when to - from > 0
      return Of(st.begin, &a) && Of(st.end, &b) && Combine(b, a, -1, 0, gate);
    if (st.kind != Statement::Kind::kIf) return false;
    Expr::Term t;
    if (!st.value.AsOneTerm(&t) || !Operand(t.a, &a) || !Operand(t.b, &b)) return false;
    switch (t.op) {  // integers: x >= y is x - y + 1 > 0
      case Expr::Op::kGt: return Combine(a, b, -1, 0, gate);
      case Expr::Op::kGe: return Combine(a, b, -1, 1, gate);
      case Expr::Op::kLt: return Combine(b, a, -1, 0, gate);
      case Expr::Op::kLe: return Combine(b, a, -1, 1, gate);
      default: return false;
    }
  }

  // A let value or a loop bound: buffer[v + k] (minus an earlier let), an earlier let, a constant.
  bool Of(const Expr& e, Affine* out) {
    Expr::OffsetLoad l;
    if (e.AsOffsetLoad(&l)) {
      int k = 0;
      if (l.index_slot != loop_.slot || !Element(l, &k)) return false;
      Affine a;
      a.coef[k] = 1;
      if (l.minus_slot < 0) {
        *out = a;
        return true;
      }
      const auto it = lets_.find(l.minus_slot);
      return it != lets_.end() && Combine(a, it->second, -1, 0, out);
    }
    Expr::Term t;
    return e.AsOneTerm(&t) && t.op == Expr::Op::kConst && Operand(t.a, out);
  }

  bool Operand(const Expr::Operand& o, Affine* out) {
    if (!o.var) {
      *out = Affine();
      out->constant = o.value;
      return Bounded(*out);
    }
    const auto it = lets_.find(static_cast<int32_t>(o.value));
    if (it == lets_.end()) return false;
    *out = it->second;
    return true;
  }

  // The slot of element buffer[v + l.offset] among this walk's (at most two).
  bool Element(const Expr::OffsetLoad& l, int* k) {
    if (w_.loads == 0) {
      w_.buffer = l.buffer;
      w_.width = l.width;
      w_.field = l.field;
    }
    if (l.buffer != w_.buffer || l.width != w_.width || l.field != w_.field) return false;
    if (l.offset < -kMaxConstant || l.offset > kMaxConstant) return false;
    for (*k = 0; *k < w_.loads; ++*k)
      if (w_.offset[*k] == l.offset) return true;
    if (w_.loads == 2) return false;
    w_.offset[w_.loads++] = l.offset;
    return true;
  }

  // out = a + sign * b + constant, if it stays small.
  static bool Combine(const Affine& a, const Affine& b, int64_t sign, int64_t constant,
                      Affine* out) {
    Affine r;
    for (int k = 0; k < 2; ++k) r.coef[k] = a.coef[k] + sign * b.coef[k];
    r.constant = a.constant + sign * b.constant + constant;
    if (!Bounded(r)) return false;
    *out = r;
    return true;
  }
  static bool Bounded(const Affine& a) {
    for (int64_t c : a.coef)
      if (c < -kMaxCoef || c > kMaxCoef) return false;
    return a.constant >= -kMaxConstant && a.constant <= kMaxConstant;
  }

  const Statement& loop_;
  CsrWalk w_;
  std::map<int32_t, Affine> lets_;  // let slot -> its value
};

// Compiles a program, assigning variable slots as it goes.
class ProgramCompiler {
 public:
  ProgramCompiler(Contract* c, std::string file) : c_(c), file_(std::move(file)) {}

  Status Compile(const json& program, ExprScope scope) {
    if (!program.is_array()) return Err("$.program", "must be an array of statements");
    return Body(program, "$.program", scope, &c_->program, 0);
  }
  Status Grid(const std::string& text, const ExprScope& scope) {
    MLASIM_ASSIGN_OR_RETURN(c_->grid, Expr::Compile(text, scope, file_ + ": $.launch.grid"));
    return OkStatus();
  }

 private:
  Status Err(const std::string& path, const std::string& why) const {
    return InvalidArgumentError(file_ + ": " + path, why);
  }
  Status ExprAt(const json& j, const std::string& path, const ExprScope& scope, Expr* out) {
    if (j.is_number_integer() && IsInt64(j)) {
      *out = Expr::Constant(j.get<int64_t>());
      return OkStatus();
    }
    if (j.is_number_integer() || IsIntegerBeyond64Bits(j))  // beyond int64
      return Err(path, IntegerRangeReason(j, INT64_MIN, INT64_MAX));
    if (!j.is_string()) return Err(path, "must be an expression (a string) or an integer");
    MLASIM_ASSIGN_OR_RETURN(*out, Expr::Compile(j.get<std::string>(), scope, file_ + ": " + path));
    return OkStatus();
  }
  Status Range(ObjectReader& r, const json& st, const char* key, const std::string& path,
               const ExprScope& scope, Expr* b, Expr* e) {
    const json* v = r.Child(key);
    if (!v) return Err(path + "." + key, "required key is missing ([begin, end))");
    if (!v->is_array() || v->size() != 2)
      return Err(path + "." + key, "must be [begin, end): two expressions");
    (void)st;
    MLASIM_RETURN_IF_ERROR(ExprAt((*v)[0], path + "." + key + "[0]", scope, b));
    return ExprAt((*v)[1], path + "." + key + "[1]", scope, e);
  }

  Status Body(const json& body, const std::string& path, ExprScope& scope,
              std::vector<Statement>* out, int depth) {
    if (!body.is_array()) return Err(path, "must be an array of statements");
    if (body.size() > 256) return Err(path, "at most 256 statements");
    for (size_t i = 0; i < body.size(); ++i) {
      // The whole program against the limits table (ref/limits.h): a statement costs kilobytes
      // compiled and runs per work item.
      if (++statements_ > ref::Limit(ref::LimitId::kContractStatements))
        return ref::TooLarge(file_ + ": " + path + "[" + std::to_string(i) + "]", statements_,
                             ref::LimitId::kContractStatements,
                             "statements in the contract's program");
      Statement s;
      MLASIM_RETURN_IF_ERROR(One(body[i], path + "[" + std::to_string(i) + "]", scope, &s, depth));
      out->push_back(std::move(s));
    }
    FindLetRows(out);
    return OkStatus();
  }

  // Marks each run of two or more lets (without `when`) that load fields of one row with the
  // same index variable (Statement::let_row). Every let has a slot of its own, so no let of a
  // run changes the index variable.
  static void FindLetRows(std::vector<Statement>* body) {
    auto row_load = [](const Statement& st, Expr::RowLoad* r) {
      return st.kind == Statement::Kind::kLet && st.when.empty() && st.value.AsRowLoad(r);
    };
    for (size_t i = 0; i < body->size();) {
      Expr::RowLoad first;
      if (!row_load((*body)[i], &first)) {
        ++i;
        continue;
      }
      LetRow run{first.buffer, first.index_slot, first.width, {}};
      size_t j = i;
      for (Expr::RowLoad r; j < body->size() && row_load((*body)[j], &r); ++j) {
        if (r.buffer != first.buffer || r.index_slot != first.index_slot || r.width != first.width)
          break;
        run.slot_field.emplace_back((*body)[j].slot, r.field);
      }
      if (run.width == 8) {
        unsigned char mask[8] = {};
        bool in_row = true;
        for (const auto& [slot, field] : run.slot_field) {
          in_row &= field >= 0 && field < 8;
          if (field >= 0 && field < 8) mask[field] = 0xff;
        }
        if (in_row) std::memcpy(&run.cell_mask, mask, 8);
      }
      if (run.slot_field.size() >= 2) (*body)[i].let_row = std::move(run);
      i = j;
    }
  }

  Status One(const json& j, const std::string& path, ExprScope& scope, Statement* s, int depth) {
    if (!j.is_object()) return Err(path, "must be an object (a statement)");
    s->path = path;
    static const char* kKinds[] = {"read", "write", "gather", "loop", "let", "if"};
    int found = 0;
    for (const char* k : kKinds) found += j.contains(k);
    if (found != 1)
      return Err(path, "needs exactly one of read, write, gather, loop, let, if");
    ObjectReader r(j, file_ + ": " + path);
    MLASIM_RETURN_IF_ERROR(r.String("source", &s->source));
    if (j.contains("when")) MLASIM_RETURN_IF_ERROR(ExprAt(*r.Child("when"), path + ".when", scope,
                                                          &s->when));
    if (j.contains("read") || j.contains("write")) {
      s->kind = j.contains("read") ? Statement::Kind::kRead : Statement::Kind::kWrite;
      MLASIM_RETURN_IF_ERROR(
          Role(r, j.contains("read") ? "read" : "write", path, &s->buffer, &s->role));
      std::string unit = "rows";
      MLASIM_RETURN_IF_ERROR(r.String("unit", &unit));
      MLASIM_ASSIGN_OR_RETURN(s->unit, Parse(kUnits, unit, file_ + ": " + path + ".unit"));
      MLASIM_RETURN_IF_ERROR(Range(r, j, "rows", path, scope, &s->begin, &s->end));
    } else if (j.contains("gather")) {
      s->kind = Statement::Kind::kGather;
      MLASIM_RETURN_IF_ERROR(Role(r, "gather", path, &s->buffer, &s->role));
      MLASIM_RETURN_IF_ERROR(Role(r, "index", path, &s->index, &s->index_role));
      MLASIM_RETURN_IF_ERROR(Range(r, j, "positions", path, scope, &s->begin, &s->end));
      s->page_size = Expr::Constant(1);
      if (const json* ps = r.Child("page_size"))
        MLASIM_RETURN_IF_ERROR(ExprAt(*ps, path + ".page_size", scope, &s->page_size));
    } else if (j.contains("let")) {
      s->kind = Statement::Kind::kLet;
      MLASIM_RETURN_IF_ERROR(Var(r, "let", path, &s->var));
      const json* v = r.Child("value");
      if (!v) return Err(path + ".value", "required key is missing");
      MLASIM_RETURN_IF_ERROR(ExprAt(*v, path + ".value", scope, &s->value));
      s->slot = c_->num_slots++;
      scope.Var(s->var, s->slot);  // visible to the statements after it
    } else if (j.contains("if")) {
      s->kind = Statement::Kind::kIf;
      MLASIM_RETURN_IF_ERROR(ExprAt(*r.Child("if"), path + ".if", scope, &s->value));
      const json* body = r.Child("body");
      if (!body) return Err(path + ".body", "required key is missing");
      ExprScope inner = scope;
      MLASIM_RETURN_IF_ERROR(Body(*body, path + ".body", inner, &s->body, depth));
    } else {
      MLASIM_RETURN_IF_ERROR(Loop(r, path, scope, s, depth));
    }
    return r.Finish();
  }

  Status Loop(ObjectReader& r, const std::string& path, const ExprScope& scope, Statement* s,
              int depth) {
    s->kind = Statement::Kind::kLoop;
    if (depth >= 8) return Err(path, "loops nested deeper than 8");
    MLASIM_RETURN_IF_ERROR(Var(r, "loop", path, &s->var));
    const json* from = r.Child("from");
    const json* to = r.Child("to");
    if (!from || !to) return Err(path, "a loop needs \"from\" and \"to\"");
    MLASIM_RETURN_IF_ERROR(ExprAt(*from, path + ".from", scope, &s->begin));
    MLASIM_RETURN_IF_ERROR(ExprAt(*to, path + ".to", scope, &s->end));
    std::string attribute = "none";
    MLASIM_RETURN_IF_ERROR(r.String("attribute", &attribute));
    MLASIM_ASSIGN_OR_RETURN(s->attribute,
                            Parse(kAttributions, attribute, file_ + ": " + path + ".attribute"));
    if (const json* bound = r.Child("bound")) {
      MLASIM_RETURN_IF_ERROR(ExprAt(*bound, path + ".bound", scope, &s->bound));
      MLASIM_RETURN_IF_ERROR(r.String("bound_what", &s->bound_what, true));
      MLASIM_RETURN_IF_ERROR(r.String("exceeded", &s->exceeded));
      MLASIM_RETURN_IF_ERROR(Role(r, "hang_buffer", path, &s->hang_buffer, &s->hang_role));
      const json* row = r.Child("hang_row");
      if (!row) return Err(path + ".hang_row", "required with a bound");
      MLASIM_RETURN_IF_ERROR(ExprAt(*row, path + ".hang_row", scope, &s->hang_row));
    }
    s->slot = c_->num_slots++;
    ExprScope inner = scope;
    inner.Var(s->var, s->slot);
    const json* body = r.Child("body");
    if (!body) return Err(path + ".body", "required key is missing");
    MLASIM_RETURN_IF_ERROR(Body(*body, path + ".body", inner, &s->body, depth + 1));
    CsrFinder(*s).Find(&s->csr);
    return OkStatus();
  }

  Status Var(ObjectReader& r, const char* key, const std::string& path, std::string* out) {
    MLASIM_RETURN_IF_ERROR(r.String(key, out, true));
    if (!IsDeclarableName(*out))
      return Err(path + "." + key, "must be a name (letters, digits, _)");
    return OkStatus();
  }

  Status Role(ObjectReader& r, const char* key, const std::string& path, std::string* out,
              int32_t* id) {
    MLASIM_RETURN_IF_ERROR(r.String(key, out, true));
    const auto& roles = CallRoles(c_->call);
    const auto it = std::find(roles.begin(), roles.end(), *out);
    if (it != roles.end()) {
      *id = static_cast<int32_t>(it - roles.begin());
      return OkStatus();
    }
    std::string known;
    for (const std::string& x : roles) known += (known.empty() ? "" : ", ") + x;
    return Err(path + "." + key, "a " + std::string(CallKindName(c_->call)) +
                                     " call passes no buffer \"" + *out + "\" (it passes " +
                                     known + ")");
  }

  Contract* c_;
  int64_t statements_ = 0;  // compiled so far, nested ones included
  std::string file_;
};

Status ParseSemantics(const json& j, const std::string& file, DecodeSemantics* sem) {
  ObjectReader r(j, file + ": $.semantics");
  MLASIM_RETURN_IF_ERROR(r.Check());
  std::string s;
  struct Field {
    const char* key;
    std::function<Status(const std::string&, const std::string&)> set;
  };
  const Field fields[] = {
      {"zero_kv",
       [&](const std::string& v, const std::string& f) -> Status {
         MLASIM_ASSIGN_OR_RETURN(sem->zero_kv, Parse(kZeroKv, v, f));
         return OkStatus();
       }},
      {"masked_keys",
       [&](const std::string& v, const std::string& f) -> Status {
         MLASIM_ASSIGN_OR_RETURN(sem->masked_keys, Parse(kMaskedKeys, v, f));
         return OkStatus();
       }},
      {"invalid_index",
       [&](const std::string& v, const std::string& f) -> Status {
         MLASIM_ASSIGN_OR_RETURN(sem->invalid_index, Parse(kInvalidIndex, v, f));
         return OkStatus();
       }},
      {"empty_rows", [&](const std::string& v, const std::string& f) -> Status {
         MLASIM_ASSIGN_OR_RETURN(sem->empty_rows, Parse(kEmptyRows, v, f));
         return OkStatus();
       }}};
  for (const Field& f : fields) {
    if (!r.Has(f.key)) continue;
    MLASIM_RETURN_IF_ERROR(r.String(f.key, &s));
    MLASIM_RETURN_IF_ERROR(f.set(s, r.Path(f.key)));
  }
  if (const json* src = r.Child("sources")) {
    if (!src->is_object()) return InvalidArgumentError(r.Path("sources"), "must be an object");
    for (auto it = src->begin(); it != src->end(); ++it) {
      const std::string k = it.key();
      if (k != "zero_kv" && k != "masked_keys" && k != "invalid_index" && k != "empty_rows")
        return InvalidArgumentError(r.Path("sources") + "." + k, "unknown semantics field");
      if (!it.value().is_string())
        return InvalidArgumentError(r.Path("sources") + "." + k, "must be a string");
      sem->sources[k] = it.value().get<std::string>();
    }
  }
  return r.Finish();
}

// Why `name` cannot be a constant of a `call` contract, or "": a constant is a number of the
// contract's own. One named like a launch variable or a semantics switch replaced it in the
// program (not in the launch, nor in the semantics the numerics and the GPU runner read); one
// named like a buffer was hidden by the buffer; one that is no name could not be used.
std::string ConstantNameProblem(const std::string& name, CallKind call) {
  if (!IsDeclarableName(name)) return "must be a name (letters, digits, _)";
  for (const char* v : kLaunchVarNames)
    if (name == v) return "is a launch variable; a constant needs a name of its own";
  for (const char* s : {"zero_kv_reads_q", "zero_kv_writes_output", "masked_keys_read"})
    if (name == s)
      return "is a switch that semantics sets (semantics.zero_kv / masked_keys); a constant "
             "needs a name of its own";
  for (const auto& [slot, b] : Loadables(call))
    if (name == b.name)
      return std::string("is a buffer a ") + CallKindName(call) +
             " contract loads from; a constant needs a name of its own";
  return "";
}

// The scope of a contract's expressions: launch variables, semantics flags, constants, loads.
ExprScope BaseScope(const Contract& c) {
  ExprScope scope;
  for (int32_t v = 0; v < kLaunchVarCount; ++v) scope.Var(kLaunchVarNames[v], v);
  const bool reads_q = c.semantics.zero_kv != ZeroKv::kSkips;
  const bool writes = c.semantics.zero_kv == ZeroKv::kReadsQWritesOutput;
  scope.Const("zero_kv_reads_q", reads_q);
  scope.Const("zero_kv_writes_output", writes);
  scope.Const("masked_keys_read", c.semantics.masked_keys == MaskedKeys::kReadThenMask);
  for (const auto& [name, value] : c.constants) scope.Const(name, value);
  for (const auto& [slot, b] : Loadables(c.call)) scope.Buffer(b, slot);
  return scope;
}

StatusOr<json> ResolveExtends(const json& doc, const std::string& file, int depth) {
  if (!doc.is_object()) return InvalidArgumentError(file + ": $", "must be an object");
  if (!doc.contains("extends")) return doc;
  if (depth > 4) return InvalidArgumentError(file + ": $.extends", "extends chain deeper than 4");
  const json& e = doc.at("extends");
  if (!e.is_string()) return InvalidArgumentError(file + ": $.extends", "must be a string");
  const std::string base = e.get<std::string>();
  static const std::vector<json> kDocs = [] {  // each embedded text parsed once
    std::vector<json> docs;
    for (int i = 0; i < kEmbeddedContractsCount; ++i) {
      auto parsed = ParseJsonStrict(kEmbeddedContracts[i].text, kEmbeddedContracts[i].file);
      MLASIM_ASSERT(parsed.ok(), parsed.status().ToString());
      docs.push_back(std::move(*parsed));
    }
    return docs;
  }();
  int other_call = -1;  // a built-in of that name for another call kind
  for (int i = 0; i < kEmbeddedContractsCount; ++i) {
    const json& b = kDocs[i];
    const std::string b_file = kEmbeddedContracts[i].file;
    if (b.value("name", "") != base && b.value("variant", "") != base && b_file != base &&
        b_file != base + ".json")
      continue;
    if (doc.contains("call") && b.contains("call") && doc.at("call") != b.at("call")) {
      if (other_call < 0) other_call = i;
      continue;
    }
    MLASIM_ASSIGN_OR_RETURN(json merged, ResolveExtends(b, kEmbeddedContracts[i].file, depth + 1));
    json over = doc;
    over.erase("extends");
    Merge(&merged, over);
    return merged;
  }
  if (other_call >= 0)
    return InvalidArgumentError(
        file + ": $.extends",
        "the built-in contract \"" + base + "\" (" + kEmbeddedContracts[other_call].file +
            ") is a " + kDocs[other_call].value("call", "") + " contract, and $.call is " +
            doc.at("call").dump() + " (extend a " + doc.at("call").dump() +
            " contract, or leave $.call out)");
  return InvalidArgumentError(file + ": $.extends",
                              "no built-in contract named \"" + base + "\" (built-in: " +
                                  [] {
                                    std::string k;
                                    for (int i = 0; i < kEmbeddedContractsCount; ++i)
                                      k += std::string(k.empty() ? "" : ", ") +
                                           kEmbeddedContracts[i].file;
                                    return k;
                                  }() +
                                  ")");
}

}  // namespace

const char* CallKindName(CallKind k) { return NameOf(kCallKinds, k); }
StatusOr<CallKind> ParseCallKind(const std::string& s, const std::string& field) {
  return Parse(kCallKinds, s, field);
}
const char* ZeroKvName(ZeroKv z) { return NameOf(kZeroKv, z); }
const char* MaskedKeysName(MaskedKeys m) { return NameOf(kMaskedKeys, m); }
const char* InvalidIndexName(InvalidIndex i) { return NameOf(kInvalidIndex, i); }
const char* EmptyRowsName(EmptyRows e) { return NameOf(kEmptyRows, e); }
const char* LaunchVarName(int32_t v) {
  return v >= 0 && v < kLaunchVarCount ? kLaunchVarNames[v] : "?";
}

const std::vector<std::string>& CallRoles(CallKind call) {
  static const std::vector<std::string> kDecode = {"q",        "o",          "logits",
                                                   "attn_lse", "lse",        "kv_indices",
                                                   "kv_cache", "work_indptr", "work_info"};
  static const std::vector<std::string> kReduce = {"o",
                                                   "logits",
                                                   "attn_lse",
                                                   "lse",
                                                   "reduce_indptr",
                                                   "reduce_final_map",
                                                   "reduce_partial_map"};
  static const std::vector<std::string> kFill = {"indices", "indptr"};
  static const std::vector<std::string> kNone = {};
  switch (call) {
    case CallKind::kDecode: return kDecode;
    case CallKind::kReduce: return kReduce;
    case CallKind::kIndexFill: return kFill;
    default: return kNone;
  }
}

StatusOr<Contract> ParseContract(const json& input, const std::string& file) {
  Contract c;
  // The resolved document straight into the contract: one copy of a tree that may hold
  // json_values values, not two (ref/limits.h, scripts/memory-bound.sh).
  MLASIM_ASSIGN_OR_RETURN(c.doc, ResolveExtends(input, file, 0));
  const json& doc = c.doc;
  c.file = file;
  ObjectReader r(doc, file + ": $");
  MLASIM_RETURN_IF_ERROR(r.Check());
  int64_t version = 0;
  MLASIM_RETURN_IF_ERROR(r.Int64("contract", &version, 1, 1, true));
  MLASIM_RETURN_IF_ERROR(r.String("name", &c.name, true));
  MLASIM_RETURN_IF_ERROR(r.String("variant", &c.variant, true));
  // Both are printed by check's and replay's text reports ("under NAME (FILE)", "kernel VARIANT").
  MLASIM_RETURN_IF_ERROR(PrintableText(r.Path("name"), c.name));
  MLASIM_RETURN_IF_ERROR(PrintableText(r.Path("variant"), c.variant));
  MLASIM_RETURN_IF_ERROR(r.String("source", &c.source, true));
  std::string call;
  MLASIM_RETURN_IF_ERROR(r.String("call", &call, true));
  MLASIM_ASSIGN_OR_RETURN(c.call, ParseCallKind(call, r.Path("call")));
  if (const json* sem = r.Child("semantics"))
    MLASIM_RETURN_IF_ERROR(ParseSemantics(*sem, file, &c.semantics));
  if (const json* k = r.Child("constants")) {
    if (!k->is_object()) return InvalidArgumentError(r.Path("constants"), "must be an object");
    for (auto it = k->begin(); it != k->end(); ++it) {
      if (std::string why = ConstantNameProblem(it.key(), c.call); !why.empty())
        return InvalidArgumentError(r.Path("constants") + "." + it.key(), why);
      if (!it.value().is_number_integer() || !IsInt64(it.value()))
        return InvalidArgumentError(r.Path("constants") + "." + it.key(),
                                    IntegerRangeReason(it.value(), INT64_MIN, INT64_MAX));
      c.constants[it.key()] = it.value().get<int64_t>();
    }
  }
  if (c.call == CallKind::kPlanBuild || c.call == CallKind::kPlanUpdate) {
    MLASIM_RETURN_IF_ERROR(r.String("model", &c.model, true));
    if (c.model != "get_mla_metadata_v1" && c.model != "decode_update_mla_metadata_v1")
      return InvalidArgumentError(r.Path("model"),
                                  "must be get_mla_metadata_v1 or decode_update_mla_metadata_v1");
    MLASIM_RETURN_IF_ERROR(r.Finish());
    return c;
  }
  const json* launch = r.Child("launch");
  if (!launch) return InvalidArgumentError(r.Path("launch"), "required key is missing");
  ObjectReader l(*launch, r.Path("launch"));
  MLASIM_RETURN_IF_ERROR(l.Check());
  std::string grid;
  MLASIM_RETURN_IF_ERROR(l.String("grid", &grid, true));
  MLASIM_RETURN_IF_ERROR(l.String("source", &c.grid_source));
  MLASIM_RETURN_IF_ERROR(l.Finish());
  ProgramCompiler pc(&c, file);
  const ExprScope scope = BaseScope(c);
  MLASIM_RETURN_IF_ERROR(pc.Grid(grid, scope));
  const json* program = r.Child("program");
  if (!program) return InvalidArgumentError(r.Path("program"), "required key is missing");
  MLASIM_RETURN_IF_ERROR(pc.Compile(*program, scope));
  MLASIM_RETURN_IF_ERROR(r.Finish());
  CompileFlatBodies(&c);
  return c;
}

StatusOr<Contract> LoadContractFile(const std::string& path, const std::string& field) {
  MLASIM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, field));
  MLASIM_ASSIGN_OR_RETURN(json doc, ParseJsonStrict(text, path));
  return ParseContract(doc, path);
}

const std::vector<std::shared_ptr<const Contract>>& BuiltinContracts() {
  static const std::vector<std::shared_ptr<const Contract>> kAll = [] {
    std::vector<std::shared_ptr<const Contract>> out;
    for (int i = 0; i < kEmbeddedContractsCount; ++i) {
      const std::string file = std::string("builtin:") + kEmbeddedContracts[i].file;
      auto doc = ParseJsonStrict(kEmbeddedContracts[i].text, file);
      MLASIM_ASSERT(doc.ok(), doc.status().ToString());
      auto c = ParseContract(*doc, file);
      MLASIM_ASSERT(c.ok(), c.status().ToString());
      out.push_back(std::make_shared<const Contract>(std::move(*c)));
    }
    return out;
  }();
  return kAll;
}

std::vector<std::string> BuiltinVariants(CallKind call) {
  std::vector<std::string> out;
  for (const auto& c : BuiltinContracts())
    if (c->call == call) out.push_back(c->variant);
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::shared_ptr<const Contract>> BuiltinContract(CallKind call,
                                                          const std::string& variant,
                                                          const std::string& field) {
  for (const auto& c : BuiltinContracts())
    if (c->call == call && (c->variant == variant || c->name == variant)) return c;
  std::string known;
  for (const std::string& v : BuiltinVariants(call)) known += (known.empty() ? "" : ", ") + v;
  return InvalidArgumentError(field, "no built-in " + std::string(CallKindName(call)) +
                                         " contract \"" + variant + "\" (known: " + known + ")");
}

std::string DecodeVariant(const Scenario& s) {
  for (const auto& c : s.contracts)
    if (c->call == CallKind::kDecode) return c->variant;
  return s.kernel;
}

StatusOr<std::shared_ptr<const Contract>> WithConstants(
    const std::shared_ptr<const Contract>& c, const std::map<std::string, int64_t>& values) {
  bool same = true;
  for (const auto& [name, v] : values) {
    const auto it = c->constants.find(name);
    if (it == c->constants.end())
      return InvalidArgumentError("contract", "the " + std::string(CallKindName(c->call)) +
                                                  " contract " + c->name +
                                                  " has no switch (constant) named " + name);
    same = same && it->second == v;
  }
  if (same) return c;
  static std::mutex mu;
  // The key holds the base contract alive, so its address is never reused for another one.
  struct Entry {
    std::shared_ptr<const Contract> base, variant;
  };
  static std::map<std::pair<const Contract*, std::map<std::string, int64_t>>, Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  Entry& slot = cache[{c.get(), values}];
  if (!slot.variant) {
    json doc = c->doc;
    for (const auto& [name, v] : values) doc["constants"][name] = v;
    MLASIM_ASSIGN_OR_RETURN(Contract variant, ParseContract(doc, c->file));
    slot.base = c;
    slot.variant = std::make_shared<const Contract>(std::move(variant));
  }
  return slot.variant;
}

StatusOr<std::shared_ptr<const Contract>> ContractFor(const Scenario& s, CallKind call,
                                                      const std::string& variant,
                                                      const std::string& field) {
  for (const auto& c : s.contracts)
    if (c->call == call) return c;
  return BuiltinContract(call, variant, field);
}

bool ProgramLoads(const std::vector<Statement>& program, int32_t slot) {
  for (const Statement& s : program) {
    for (const Expr* e : {&s.begin, &s.end, &s.when, &s.page_size, &s.bound, &s.hang_row, &s.value})
      if (e->LoadsFrom(slot)) return true;
    if (ProgramLoads(s.body, slot)) return true;
  }
  return false;
}

}  // namespace mlasim::sim
