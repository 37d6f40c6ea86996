// File: sim/flat.h
//
// Compiled loop bodies (docs/contracts.md "How the executor runs a contract"): the statements of
// a contract loop's body, after constant folding, as one flat array of small records whose
// expressions are already specialised by shape, so that a work item runs one record per statement
// and no shape dispatch per expression. What the compiled form expresses:
//   - affine (bilinear) forms `c + k0*x0*y0 + k1*x1*y1 + k2*x2*y2` over variable slots, in 64-bit
//     wrapping arithmetic (exact: + - * of the interpreter are a ring modulo 2^64), defined when
//     every variable the expression names is;
//   - sub-expressions over launch variables only (`index_rows / 16 + 1`, `page_size == 1`),
//     evaluated once per call into a slot of their own (Contract::hoisted);
//   - conditions: one comparison of two forms, or two joined by && or ||;
//   - values: a form; a form / % cdiv a constant; a load `buf[form * width + field]`, alone or
//     plus or minus a form; a condition ? value : value;
//   - statements: let (a row load run, a form, a value), read / write, gather, loop, if, each
//     with an optional `when` condition.
// A body with anything else (a generic expression, `u32`, a division by a variable, three
// comparisons in a row, ...) has no compiled form: the interpreter runs it as written (the
// generic path). The compiled form evaluates what the interpreter evaluates, in its order: the
// same loads (so the same reads are recorded), the same definedness, the same values.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/expr.h"

namespace mlasim::sim {

struct Contract;
struct Statement;
struct LetRow;
struct CsrWalk;

// value = c + sum k[i] * vars[x[i]] * vars[y[i]] (wrapping); defined when every d[j] slot is.
// Unused terms and checks name Contract::one_slot (always 1, always defined) with k = 0.
struct FlatLin {
  // kConst: c alone; kVar: c + vars[x[0]] (one term, k = 1, y = one); kOne: one term,
  // c + k[0] * vars[x[0]] * vars[y[0]]; kGeneral: the sum.
  enum class Form : uint8_t { kConst, kVar, kOne, kGeneral };
  Form form = Form::kGeneral;
  int64_t c = 0;
  int64_t k[3] = {0, 0, 0};
  int32_t x[3] = {0, 0, 0}, y[3] = {0, 0, 0};
  int32_t d[4] = {0, 0, 0, 0};
};

// Same evaluation: every field equal.
bool SameLin(const FlatLin& a, const FlatLin& b);

// (eq ? l == r : l < r) != neg: every comparison operator as one of two, maybe negated.
struct FlatCmp {
  FlatLin l, r;
  bool eq = false, neg = false;
  // The common shape, one side a lone variable (kVar: x = xc + vars[slot]) and the other a
  // constant k, as data (SetCmpOutcomes): the comparison holds iff bit (x < k ? 0 : x == k ? 1 :
  // 2) of `outcomes` is set. What the unchecked executor evaluates (the variable is defined);
  // slot -1: another shape (l and r as above).
  int32_t slot = -1;
  int64_t xc = 0, k = 0;
  uint8_t outcomes = 0;
};
// Sets c's slot, xc, k and outcomes from l, r, eq and neg (slot -1 for another shape).
void SetCmpOutcomes(FlatCmp* c);

// One comparison, or two joined by && / || (the right one matters only when the left one does
// not decide, as in the interpreter).
struct FlatCond {
  enum class Join : uint8_t { kOne, kAnd, kOr };
  Join join = Join::kOne;
  FlatCmp a, b;
};
bool SameCond(const FlatCond& a, const FlatCond& b);

struct FlatValue {
  enum class Kind : uint8_t { kLin, kPost, kLoad, kSelect };
  Kind kind = Kind::kLin;
  FlatLin lin;  // kLin; kPost: the dividend; kLoad: the other side (0 when alone)
  Expr::Op post = Expr::Op::kDiv;  // kPost: kDiv, kMod or kCdiv by `divisor` (not 0, not -1)
  int64_t divisor = 1;
  // kLoad: lin + sign * buf[index * width + field]; other_first: `lin` comes before the load in
  // the expression (an undefined `lin` then loads nothing).
  int32_t buffer = 0, width = 1, field = 0;
  FlatLin index;
  int64_t sign = 1;
  bool other_first = false;
  int32_t cond = -1, then_value = -1, else_value = -1;  // kSelect: indices into FlatBody
};

struct FlatRecord {
  enum class Kind : uint8_t {
    kLetLin,    // vars[slot] = begin
    kLetValue,  // vars[slot] = values[v[0]]
    kLetRow,    // FlatBody::rows[row]: a run of row loads (LetRow)
    kAccess,    // read / write rows [begin, end) of role
    kAccessValue,  // the same, rows [values[v[0]], values[v[1]])
    kGather,    // positions [values[v[0]], values[v[1]]), page size values[v[2]]
    kLoop,      // from values[v[0]] to values[v[1]], bound values[v[2]] (-1: none)
    kIf,        // cond
  };
  Kind kind = Kind::kLetLin;
  bool write = false;
  uint8_t unit = 0;       // AccessUnit
  uint8_t attribute = 0;  // LoopAttribution
  int32_t when = -1;      // FlatBody::conds index; -1: always
  int32_t slot = -1;      // let / loop variable
  int32_t role = -1, index_role = -1;
  int32_t v[3] = {-1, -1, -1};
  int32_t cond = -1;      // kIf
  int32_t row = -1;       // kLetRow
  int32_t csr = -1;       // kLoop: FlatBody::csrs index when the loop is a CSR walk
  int32_t stmt = -1;      // kLoop: FlatBody::paths index (the statement, for a hang report)
  int32_t body_end = 0;   // kLoop / kIf: the body is records (this one, body_end)
  bool empty_body = false;  // kLoop
  // kLoop: its body is a decode work item of the shape FlatDecodeItemShape names, which the
  // executor runs as one step while every variable slot is defined.
  bool decode_item = false;
  int32_t item_row = -1;  // decode_item: FlatBody::item_rows index (its row of lets, fixed)
  // kLoop: its body is a let of a load and two accesses of the same rows (FlatLoadThenAccesses:
  // the reduce's partial rows), run as one step while every variable slot is defined.
  bool load_then_accesses = false;
  // kAccess: its `when` and rows are those of the kAccess record just before it in its body
  // (the decode's logits and attn_lse writes): it takes what that record evaluated (an access
  // sets no variable and loads nothing, so nothing can have changed in between). The record it
  // takes them from has feeds_next.
  bool same_as_prev = false, feeds_next = false;
  FlatLin begin, end;     // kLetLin: begin; kAccess: rows
};

// A decode item's row of lets (FlatDecodeItemShape) as fixed arrays, so that the item copies
// them without a loop: vars[slot[k]] = row[field[k]] for k < n, the run's (slot, field) pairs
// in program order, copied in any order (the slots differ). n is 0 when the run has more than 8
// lets or names a slot twice (then the item copies LetRow::slot_field in order).
struct FlatItemRow {
  int32_t slot[8] = {}, field[8] = {};
  int32_t n = 0;
};
FlatItemRow MakeFlatItemRow(const LetRow& row);

struct FlatBody {
  std::vector<FlatRecord> records;
  std::vector<FlatItemRow> item_rows;
  std::vector<FlatCond> conds;
  std::vector<FlatValue> values;
  std::vector<LetRow> rows;
  std::vector<CsrWalk> csrs;
  // Statement paths relative to the body (indices into body, then into nested bodies).
  std::vector<std::vector<int32_t>> paths;
};

// Compiles the bodies of `c`'s loops (Statement::flat): each outermost loop whose body has a
// compiled form gets one; the loops of a body that has none are tried in turn. Allocates the
// hoisted slots and Contract::one_slot. Never fails: what it cannot express stays interpreted.
void CompileFlatBodies(Contract* c);

// Whether records[loop] is a kLoop whose body is a decode work item of this shape (aiter's
// decode contracts): a row of work_info lets (8 cells, a cell mask) at the loop variable, a let
// of a form, four accesses, a let of one more field of that row plus a constant, a gather and a
// loop with an empty body, none of the lets, the gather or the loop with a `when`.
bool FlatDecodeItemShape(const FlatBody& f, int32_t loop);

// Whether records[loop] is a kLoop whose body is a let (no `when`) of a load at any form plus a
// constant, then two kAccess records without `when`, the second taking the first's rows
// (same_as_prev): the reduce's `let row = reduce_partial_map[first + i]`, its logits and
// attn_lse reads.
bool FlatLoadThenAccessesShape(const FlatBody& f, int32_t loop);

}  // namespace mlasim::sim
