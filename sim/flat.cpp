#include "sim/flat.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "sim/contract.h"

namespace mlasim::sim {
namespace {

using Op = Expr::Op;

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// A form being built: coefficients keyed by (x, y) slots (y = -1: a lone variable), and every
// slot the expression names (its definedness counts even where a coefficient cancels to 0).
struct LinBuild {
  uint64_t c = 0;
  std::map<std::pair<int32_t, int32_t>, uint64_t> terms;
  std::set<int32_t> slots;
};

void AddScaled(const LinBuild& b, uint64_t scale, LinBuild* out) {
  out->c += b.c * scale;
  for (const auto& [key, k] : b.terms) out->terms[key] += k * scale;
  out->slots.insert(b.slots.begin(), b.slots.end());
}

// Compiles one loop body; Commit() hands its hoisted slots to the contract.
class FlatCompiler {
 public:
  explicit FlatCompiler(Contract* c) : c_(c), next_slot_(c->num_slots) {
    one_ = c->one_slot >= 0 ? c->one_slot : next_slot_++;
  }

  bool Compile(const std::vector<Statement>& body, FlatBody* out) {
    f_ = out;
    return Body(body, {});
  }
  void Commit() {
    c_->one_slot = one_;
    c_->num_slots = next_slot_;
    for (auto& h : hoisted_) c_->hoisted.push_back(std::move(h));
  }

 private:
  // ---- expressions --------------------------------------------------------------------------

  // Whether node i of e loads nothing and names launch variables only (a per-call constant).
  static bool LaunchOnly(const Expr& e, int32_t i) {
    if (i < 0) return true;
    const Expr::Node& n = e.nodes()[i];
    if (n.op == Op::kLoad) return false;
    if (n.op == Op::kVar) return n.value < kLaunchVarCount;
    return LaunchOnly(e, n.a) && LaunchOnly(e, n.b) && LaunchOnly(e, n.c);
  }
  static bool Hoistable(const Expr& e, int32_t i) {
    const Op op = e.nodes()[i].op;
    return op != Op::kConst && op != Op::kVar && LaunchOnly(e, i);
  }
  int32_t Hoist(const Expr& e, int32_t i) {
    const int32_t slot = next_slot_++;
    hoisted_.emplace_back(slot, e.Subtree(i));
    return slot;
  }

  bool Lin(const Expr& e, int32_t i, LinBuild* out) {
    const Expr::Node& n = e.nodes()[i];
    if (Hoistable(e, i)) {
      const int32_t h = Hoist(e, i);
      out->terms[{h, -1}] = 1;
      out->slots.insert(h);
      return true;
    }
    switch (n.op) {
      case Op::kConst: out->c = U(n.value); return true;
      case Op::kVar: {
        const int32_t slot = static_cast<int32_t>(n.value);
        out->terms[{slot, -1}] = 1;
        out->slots.insert(slot);
        return true;
      }
      case Op::kAdd:
      case Op::kSub: {
        LinBuild a, b;
        if (!Lin(e, n.a, &a) || !Lin(e, n.b, &b)) return false;
        AddScaled(a, 1, out);
        AddScaled(b, n.op == Op::kAdd ? 1 : ~uint64_t{0}, out);
        return true;
      }
      case Op::kNeg: {
        LinBuild a;
        if (!Lin(e, n.a, &a)) return false;
        AddScaled(a, ~uint64_t{0}, out);
        return true;
      }
      case Op::kMul: {
        LinBuild a, b;
        if (!Lin(e, n.a, &a) || !Lin(e, n.b, &b)) return false;
        out->c = a.c * b.c;
        out->slots = a.slots;
        out->slots.insert(b.slots.begin(), b.slots.end());
        for (const auto& [key, k] : a.terms) out->terms[key] += k * b.c;
        for (const auto& [key, k] : b.terms) out->terms[key] += k * a.c;
        for (const auto& [ka, ca] : a.terms) {
          for (const auto& [kb, cb] : b.terms) {
            if (ka.second >= 0 || kb.second >= 0) return false;  // three factors
            const auto key = std::minmax(ka.first, kb.first);
            out->terms[{key.first, key.second}] += ca * cb;
          }
        }
        return true;
      }
      default: return false;
    }
  }
  bool Finish(const LinBuild& b, FlatLin* out) const {
    FlatLin l;
    l.c = static_cast<int64_t>(b.c);
    for (int j = 0; j < 3; ++j) l.x[j] = l.y[j] = one_;
    for (int j = 0; j < 4; ++j) l.d[j] = one_;
    int t = 0;
    for (const auto& [key, k] : b.terms) {
      if (k == 0) continue;
      if (t == 3) return false;
      l.k[t] = static_cast<int64_t>(k);
      l.x[t] = key.first;
      l.y[t] = key.second >= 0 ? key.second : one_;
      ++t;
    }
    if (b.slots.size() > 4) return false;
    int j = 0;
    for (const int32_t s : b.slots) l.d[j++] = s;
    l.form = t == 0                                    ? FlatLin::Form::kConst
             : t == 1 && l.k[0] == 1 && l.y[0] == one_ ? FlatLin::Form::kVar
             : t == 1                                  ? FlatLin::Form::kOne
                                                       : FlatLin::Form::kGeneral;
    *out = l;
    return true;
  }
  // Node i as a form; on failure nothing stays hoisted.
  bool TryLin(const Expr& e, int32_t i, FlatLin* out) {
    const size_t hoisted = hoisted_.size();
    const int32_t next = next_slot_;
    LinBuild b;
    if (Lin(e, i, &b) && Finish(b, out)) return true;
    hoisted_.resize(hoisted);
    next_slot_ = next;
    return false;
  }
  bool Cmp(const Expr& e, int32_t i, FlatCmp* out) {
    const Expr::Node& n = e.nodes()[i];
    FlatCmp c;
    FlatLin zero;
    TryLin(Expr::Constant(0), 0, &zero);
    auto two = [&](int32_t l, int32_t r, bool eq, bool neg) {
      c.eq = eq;
      c.neg = neg;
      return TryLin(e, l, &c.l) && TryLin(e, r, &c.r);
    };
    auto against_zero = [&](int32_t x, bool neg) {  // x == 0, or x != 0
      c.eq = true;
      c.neg = neg;
      c.r = zero;
      return TryLin(e, x, &c.l);
    };
    bool ok = false;
    if (Hoistable(e, i)) {
      ok = against_zero(i, true);
    } else {
      switch (n.op) {
        case Op::kLt: ok = two(n.a, n.b, false, false); break;
        case Op::kGt: ok = two(n.b, n.a, false, false); break;
        case Op::kLe: ok = two(n.b, n.a, false, true); break;   // !(b < a)
        case Op::kGe: ok = two(n.a, n.b, false, true); break;   // !(a < b)
        case Op::kEq: ok = two(n.a, n.b, true, false); break;
        case Op::kNe: ok = two(n.a, n.b, true, true); break;
        case Op::kNot: ok = against_zero(n.a, false); break;
        case Op::kBool: ok = against_zero(n.a, true); break;
        default: ok = against_zero(i, true); break;
      }
    }
    if (ok) SetCmpOutcomes(&c);
    if (ok) *out = c;
    return ok;
  }
  bool Cond(const Expr& e, int32_t i, int32_t* out) {
    const Expr::Node& n = e.nodes()[i];
    FlatCond c;
    if ((n.op == Op::kAnd || n.op == Op::kOr) && !Hoistable(e, i)) {
      c.join = n.op == Op::kAnd ? FlatCond::Join::kAnd : FlatCond::Join::kOr;
      if (!Cmp(e, n.a, &c.a) || !Cmp(e, n.b, &c.b)) return false;
    } else if (!Cmp(e, i, &c.a)) {
      return false;
    }
    *out = static_cast<int32_t>(f_->conds.size());
    f_->conds.push_back(c);
    return true;
  }
  bool LoadOf(const Expr& e, int32_t i, FlatValue* v) {
    const Expr::Node& n = e.nodes()[i];
    if (n.op != Op::kLoad || !TryLin(e, n.a, &v->index)) return false;
    v->kind = FlatValue::Kind::kLoad;
    v->buffer = static_cast<int32_t>(n.value);
    v->width = n.width;
    v->field = n.field;
    return true;
  }
  bool Value(const Expr& e, int32_t i, int32_t* out) {
    const Expr::Node& n = e.nodes()[i];
    FlatValue v;
    bool ok = false;
    if (TryLin(e, i, &v.lin)) {
      v.kind = FlatValue::Kind::kLin;
      ok = true;
    } else if (n.op == Op::kDiv || n.op == Op::kMod || n.op == Op::kCdiv) {
      const Expr::Node& k = e.nodes()[n.b];
      ok = k.op == Op::kConst && k.value != 0 && k.value != -1 && TryLin(e, n.a, &v.lin);
      v.kind = FlatValue::Kind::kPost;
      v.post = n.op;
      v.divisor = k.value;
    } else if (n.op == Op::kLoad) {
      TryLin(Expr::Constant(0), 0, &v.lin);
      ok = LoadOf(e, i, &v);
    } else if ((n.op == Op::kAdd || n.op == Op::kSub) && e.nodes()[n.a].op == Op::kLoad) {
      // L + x, L - x: the load first; x becomes the other side (negated for -).
      LinBuild b;
      const size_t hoisted = hoisted_.size();
      const int32_t next = next_slot_;
      LinBuild other;
      ok = Lin(e, n.b, &b);
      if (ok) AddScaled(b, n.op == Op::kAdd ? 1 : ~uint64_t{0}, &other);
      ok = ok && Finish(other, &v.lin) && LoadOf(e, n.a, &v);
      if (!ok) {
        hoisted_.resize(hoisted);
        next_slot_ = next;
      }
    } else if ((n.op == Op::kAdd || n.op == Op::kSub) && e.nodes()[n.b].op == Op::kLoad) {
      // x + L, x - L: x first (undefined, it loads nothing).
      ok = TryLin(e, n.a, &v.lin) && LoadOf(e, n.b, &v);
      v.sign = n.op == Op::kAdd ? 1 : -1;
      v.other_first = true;
    } else if (n.op == Op::kSelect) {
      ok = Cond(e, n.a, &v.cond) && Value(e, n.b, &v.then_value) &&
           Value(e, n.c, &v.else_value);
      v.kind = FlatValue::Kind::kSelect;
    }
    if (!ok) return false;
    *out = static_cast<int32_t>(f_->values.size());
    f_->values.push_back(v);
    return true;
  }
  bool WholeValue(const Expr& e, int32_t* out) { return !e.empty() && Value(e, e.root(), out); }

  // ---- statements ---------------------------------------------------------------------------

  bool Body(const std::vector<Statement>& body, const std::vector<int32_t>& path) {
    int32_t prev_access = -1;  // the record of the statement before, when it is a kAccess
    for (size_t i = 0; i < body.size(); ++i) {
      const Statement& st = body[i];
      const int32_t prev = prev_access;
      prev_access = -1;
      FlatRecord r;
      if (!st.when.empty()) {
        if (st.when.is_constant()) {
          if (st.when.constant_value() == 0) continue;  // never runs
        } else if (!Cond(st.when, st.when.root(), &r.when)) {
          return false;
        }
      }
      switch (st.kind) {
        case Statement::Kind::kLet:
          r.slot = st.slot;
          if (!st.let_row.slot_field.empty()) {
            r.kind = FlatRecord::Kind::kLetRow;
            r.row = static_cast<int32_t>(f_->rows.size());
            f_->rows.push_back(st.let_row);
            i += st.let_row.slot_field.size() - 1;  // the run's other lets
          } else if (TryLin(st.value, st.value.root(), &r.begin)) {
            r.kind = FlatRecord::Kind::kLetLin;
          } else if (WholeValue(st.value, &r.v[0])) {
            r.kind = FlatRecord::Kind::kLetValue;
          } else {
            return false;
          }
          f_->records.push_back(r);
          break;
        case Statement::Kind::kRead:
        case Statement::Kind::kWrite:
          r.role = st.role;
          r.write = st.kind == Statement::Kind::kWrite;
          r.unit = static_cast<uint8_t>(st.unit);
          if (TryLin(st.begin, st.begin.root(), &r.begin) &&
              TryLin(st.end, st.end.root(), &r.end)) {
            r.kind = FlatRecord::Kind::kAccess;
            if (prev >= 0) {
              FlatRecord& p = f_->records[prev];
              const bool same_when =
                  (p.when < 0 && r.when < 0) ||
                  (p.when >= 0 && r.when >= 0 && SameCond(f_->conds[p.when], f_->conds[r.when]));
              if (same_when && SameLin(p.begin, r.begin) && SameLin(p.end, r.end)) {
                p.feeds_next = true;
                r.same_as_prev = true;
              }
            }
            prev_access = static_cast<int32_t>(f_->records.size());
          } else if (WholeValue(st.begin, &r.v[0]) && WholeValue(st.end, &r.v[1])) {
            r.kind = FlatRecord::Kind::kAccessValue;
          } else {
            return false;
          }
          f_->records.push_back(r);
          break;
        case Statement::Kind::kGather:
          r.kind = FlatRecord::Kind::kGather;
          r.role = st.role;
          r.index_role = st.index_role;
          if (!WholeValue(st.begin, &r.v[0]) || !WholeValue(st.end, &r.v[1]) ||
              !WholeValue(st.page_size, &r.v[2]))
            return false;
          f_->records.push_back(r);
          break;
        case Statement::Kind::kLoop: {
          r.kind = FlatRecord::Kind::kLoop;
          r.slot = st.slot;
          r.attribute = static_cast<uint8_t>(st.attribute);
          r.empty_body = st.body.empty();
          if (!WholeValue(st.begin, &r.v[0]) || !WholeValue(st.end, &r.v[1])) return false;
          if (!st.bound.empty() && !WholeValue(st.bound, &r.v[2])) return false;
          if (st.csr.loads > 0) {
            r.csr = static_cast<int32_t>(f_->csrs.size());
            f_->csrs.push_back(st.csr);
          }
          std::vector<int32_t> inner = path;
          inner.push_back(static_cast<int32_t>(i));
          r.stmt = static_cast<int32_t>(f_->paths.size());
          f_->paths.push_back(inner);
          if (!Nested(r, st.body, inner)) return false;
          break;
        }
        case Statement::Kind::kIf: {
          r.kind = FlatRecord::Kind::kIf;
          if (!Cond(st.value, st.value.root(), &r.cond)) return false;
          std::vector<int32_t> inner = path;
          inner.push_back(static_cast<int32_t>(i));
          if (!Nested(r, st.body, inner)) return false;
          break;
        }
      }
    }
    return true;
  }
  // A loop's or an if's record, then its body's records.
  bool Nested(const FlatRecord& r, const std::vector<Statement>& body,
              const std::vector<int32_t>& path) {
    const size_t at = f_->records.size();
    f_->records.push_back(r);
    if (!Body(body, path)) return false;
    f_->records[at].body_end = static_cast<int32_t>(f_->records.size());
    return true;
  }

  Contract* c_;
  int32_t next_slot_;
  int32_t one_ = -1;
  std::vector<std::pair<int32_t, Expr>> hoisted_;
  FlatBody* f_ = nullptr;
};

void Walk(Contract* c, std::vector<Statement>* body) {
  for (Statement& st : *body) {
    if (st.kind == Statement::Kind::kLoop) {
      auto flat = std::make_shared<FlatBody>();
      FlatCompiler fc(c);
      if (fc.Compile(st.body, flat.get())) {
        fc.Commit();
        for (size_t k = 0; k < flat->records.size(); ++k)
        {
          flat->records[k].decode_item = FlatDecodeItemShape(*flat, static_cast<int32_t>(k));
          if (flat->records[k].decode_item) {
            flat->records[k].item_row = static_cast<int32_t>(flat->item_rows.size());
            flat->item_rows.push_back(MakeFlatItemRow(flat->rows[flat->records[k + 1].row]));
          }
          flat->records[k].load_then_accesses =
              FlatLoadThenAccessesShape(*flat, static_cast<int32_t>(k));
        }
        st.flat = std::move(flat);
        continue;
      }
    }
    Walk(c, &st.body);
  }
}

}  // namespace

void CompileFlatBodies(Contract* c) { Walk(c, &c->program); }

bool FlatDecodeItemShape(const FlatBody& f, int32_t loop) {
  using K = FlatRecord::Kind;
  const FlatRecord& l = f.records[loop];
  const int32_t a = loop + 1;
  if (l.kind != K::kLoop || l.body_end != a + 9) return false;
  const FlatRecord* r = &f.records[a];
  if (r[0].kind != K::kLetRow || r[0].when >= 0) return false;
  const LetRow& row = f.rows[r[0].row];
  if (row.width != 8 || row.cell_mask == 0 || row.index_slot != l.slot) return false;
  // The row is read once, at the loop variable's value when the item starts; no let can set
  // that variable in between (every let has a slot of its own, ProgramCompiler).
  if (r[1].kind != K::kLetLin || r[1].when >= 0) return false;
  for (int k = 2; k < 6; ++k)
    if (r[k].kind != K::kAccess) return false;
  if (r[6].kind != K::kLetValue || r[6].when >= 0) return false;
  const FlatValue& v = f.values[r[6].v[0]];
  if (v.kind != FlatValue::Kind::kLoad || v.lin.form != FlatLin::Form::kConst ||
      v.buffer != row.buffer || v.width != row.width || v.field < 0 || v.field >= 8 ||
      v.index.form != FlatLin::Form::kVar || v.index.c != 0 || v.index.x[0] != row.index_slot)
    return false;
  if (r[7].kind != K::kGather || r[7].when >= 0) return false;
  if (r[8].kind != K::kLoop || r[8].when >= 0 || !r[8].empty_body) return false;
  return true;
}

void SetCmpOutcomes(FlatCmp* c) {
  using F = FlatLin::Form;
  c->slot = -1;
  c->xc = c->k = 0;
  c->outcomes = 0;
  const bool var_left = c->l.form == F::kVar && c->r.form == F::kConst;
  const bool var_right = c->l.form == F::kConst && c->r.form == F::kVar;
  if (!var_left && !var_right) return;
  const FlatLin& var = var_left ? c->l : c->r;
  c->slot = var.x[0];
  c->xc = var.c;
  c->k = (var_left ? c->r : c->l).c;
  // For each outcome of x against k (less, equal, greater): l == r or l < r, then != neg.
  for (int outcome = 0; outcome < 3; ++outcome) {
    const int sign = var_left ? outcome - 1 : 1 - outcome;  // sign of l - r
    const bool holds = (c->eq ? sign == 0 : sign < 0) != c->neg;
    c->outcomes |= static_cast<uint8_t>(holds) << outcome;
  }
}

FlatItemRow MakeFlatItemRow(const LetRow& row) {
  FlatItemRow out;
  const size_t n = row.slot_field.size();
  if (n == 0 || n > 8) return out;
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < k; ++j)  // (copied in any order: the slots must differ)
      if (row.slot_field[j].first == row.slot_field[k].first) return FlatItemRow{};
    out.slot[k] = row.slot_field[k].first;
    out.field[k] = row.slot_field[k].second;
  }
  out.n = static_cast<int32_t>(n);
  return out;
}

bool FlatLoadThenAccessesShape(const FlatBody& f, int32_t loop) {
  using K = FlatRecord::Kind;
  const FlatRecord& l = f.records[loop];
  const int32_t a = loop + 1;
  if (l.kind != K::kLoop || l.body_end != a + 3) return false;
  const FlatRecord* r = &f.records[a];
  if (r[0].kind != K::kLetValue || r[0].when >= 0) return false;
  const FlatValue& v = f.values[r[0].v[0]];
  if (v.kind != FlatValue::Kind::kLoad || v.lin.form != FlatLin::Form::kConst) return false;
  return r[1].kind == K::kAccess && r[1].when < 0 && r[1].feeds_next && r[2].kind == K::kAccess &&
         r[2].same_as_prev;
}

bool SameLin(const FlatLin& a, const FlatLin& b) {
  for (int i = 0; i < 3; ++i)
    if (a.k[i] != b.k[i] || a.x[i] != b.x[i] || a.y[i] != b.y[i]) return false;
  for (int i = 0; i < 4; ++i)
    if (a.d[i] != b.d[i]) return false;
  return a.form == b.form && a.c == b.c;
}

bool SameCond(const FlatCond& a, const FlatCond& b) {
  const auto same_cmp = [](const FlatCmp& x, const FlatCmp& y) {
    return x.eq == y.eq && x.neg == y.neg && SameLin(x.l, y.l) && SameLin(x.r, y.r);
  };
  return a.join == b.join && same_cmp(a.a, b.a) && same_cmp(a.b, b.b);
}

}  // namespace mlasim::sim
