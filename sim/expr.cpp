#include "sim/expr.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace mlasim::sim {

void ExprScope::Var(const std::string& name, int32_t slot) {
  Lookup l;
  l.kind = 1;
  l.value = slot;
  entries_.push_back({name, l});
}

void ExprScope::Const(const std::string& name, int64_t value) {
  Lookup l;
  l.kind = 2;
  l.value = value;
  entries_.push_back({name, l});
}

void ExprScope::Buffer(const LoadableBuffer& b, int32_t slot) {
  Lookup l;
  l.kind = 3;
  l.value = slot;
  buffers_.push_back(b);
  entries_.push_back({b.name, l});
}

ExprScope::Lookup ExprScope::Find(const std::string& name) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->name != name) continue;
    Lookup l = it->what;
    if (l.kind == 3) {  // the buffer declared by this entry: count buffer entries up to it
      size_t k = 0;
      for (auto jt = entries_.begin(); jt != it.base() - 1; ++jt) k += jt->what.kind == 3;
      l.buffer = &buffers_[k];
    }
    return l;
  }
  return {};
}

std::string ExprScope::KnownNames() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Recursive-descent parser over the grammar of expr.h, building Expr::nodes_.
class ExprParser {
 public:
  ExprParser(const std::string& text, const ExprScope& scope, const std::string& field, Expr* out)
      : t_(text), scope_(scope), field_(field), out_(out) {}

  Status Run() {
    int32_t root = -1;
    MLASIM_RETURN_IF_ERROR(Ternary(&root));
    Skip();
    if (pos_ != t_.size()) return Error("unexpected '" + std::string(1, t_[pos_]) + "'");
    out_->root_ = root;
    return OkStatus();
  }

 private:
  using Op = Expr::Op;

  Status Error(const std::string& why) const {
    return InvalidArgumentError(
        field_, why + " at character " + std::to_string(pos_) + " of \"" + t_ + "\"");
  }
  void Skip() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  bool Eat(const char* s) {
    Skip();
    const size_t n = std::char_traits<char>::length(s);
    if (t_.compare(pos_, n, s) != 0) return false;
    // '<' must not eat the first half of '<='; '!' not of '!='; '=' alone is not an operator.
    if (n == 1 && pos_ + 1 < t_.size() && t_[pos_ + 1] == '=' &&
        (s[0] == '<' || s[0] == '>' || s[0] == '!'))
      return false;
    pos_ += n;
    return true;
  }
  int32_t Add(Expr::Node n) {
    out_->nodes_.push_back(n);
    return static_cast<int32_t>(out_->nodes_.size() - 1);
  }
  int32_t Bin(Op op, int32_t a, int32_t b) {
    Expr::Node n;
    n.op = op;
    n.a = a;
    n.b = b;
    return Add(n);
  }
  Status Deeper() {
    if (++depth_ > 64) return Error("expression nested deeper than 64 levels");
    return OkStatus();
  }

  Status Ternary(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(Deeper());
    MLASIM_RETURN_IF_ERROR(Or(out));
    if (Eat("?")) {
      int32_t a = -1, b = -1;
      MLASIM_RETURN_IF_ERROR(Ternary(&a));
      if (!Eat(":")) return Error("expected ':'");
      MLASIM_RETURN_IF_ERROR(Ternary(&b));
      Expr::Node n;
      n.op = Op::kSelect;
      n.a = *out;
      n.b = a;
      n.c = b;
      *out = Add(n);
    }
    --depth_;
    return OkStatus();
  }
  Status Or(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(And(out));
    while (Eat("||")) {
      int32_t r = -1;
      MLASIM_RETURN_IF_ERROR(And(&r));
      *out = Bin(Op::kOr, *out, r);
    }
    return OkStatus();
  }
  Status And(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(Cmp(out));
    while (Eat("&&")) {
      int32_t r = -1;
      MLASIM_RETURN_IF_ERROR(Cmp(&r));
      *out = Bin(Op::kAnd, *out, r);
    }
    return OkStatus();
  }
  Status Cmp(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(Sum(out));
    static const std::pair<const char*, Op> kOps[] = {{"<=", Op::kLe}, {">=", Op::kGe},
                                                      {"==", Op::kEq}, {"!=", Op::kNe},
                                                      {"<", Op::kLt},  {">", Op::kGt}};
    for (const auto& [s, op] : kOps) {
      if (Eat(s)) {
        int32_t r = -1;
        MLASIM_RETURN_IF_ERROR(Sum(&r));
        *out = Bin(op, *out, r);
        return OkStatus();
      }
    }
    return OkStatus();
  }
  Status Sum(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(Product(out));
    for (;;) {
      Op op;
      if (Eat("+"))
        op = Op::kAdd;
      else if (Eat("-"))
        op = Op::kSub;
      else
        return OkStatus();
      int32_t r = -1;
      MLASIM_RETURN_IF_ERROR(Product(&r));
      *out = Bin(op, *out, r);
    }
  }
  Status Product(int32_t* out) {
    MLASIM_RETURN_IF_ERROR(Unary(out));
    for (;;) {
      Op op;
      if (Eat("*"))
        op = Op::kMul;
      else if (Eat("/"))
        op = Op::kDiv;
      else if (Eat("%"))
        op = Op::kMod;
      else
        return OkStatus();
      int32_t r = -1;
      MLASIM_RETURN_IF_ERROR(Unary(&r));
      *out = Bin(op, *out, r);
    }
  }
  Status Unary(int32_t* out) {
    Op op = Op::kConst;
    if (Eat("-"))
      op = Op::kNeg;
    else if (Eat("!"))
      op = Op::kNot;
    if (op == Op::kConst) return Postfix(out);
    MLASIM_RETURN_IF_ERROR(Deeper());  // a chain of unary operators nests too
    int32_t a = -1;
    MLASIM_RETURN_IF_ERROR(Unary(&a));
    Expr::Node n;
    n.op = op;
    n.a = a;
    *out = Add(n);
    --depth_;
    return OkStatus();
  }
  std::string Name() {
    Skip();
    const size_t b = pos_;
    while (pos_ < t_.size() &&
           (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_'))
      ++pos_;
    return t_.substr(b, pos_ - b);
  }
  Status Number(int32_t* out) {
    const size_t b = pos_;
    int64_t v = 0;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) {
      const int d = t_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) {
        pos_ = b;
        return Error("integer does not fit 64 bits");
      }
      v = v * 10 + d;
      ++pos_;
    }
    Expr::Node n;
    n.value = v;
    *out = Add(n);
    return OkStatus();
  }
  Status Postfix(int32_t* out) {
    Skip();
    if (pos_ >= t_.size()) return Error("expected a value");
    if (std::isdigit(static_cast<unsigned char>(t_[pos_]))) return Number(out);
    if (Eat("(")) {
      MLASIM_RETURN_IF_ERROR(Ternary(out));
      if (!Eat(")")) return Error("expected ')'");
      return OkStatus();
    }
    const size_t at = pos_;
    const std::string name = Name();
    if (name.empty()) return Error("expected a value");
    if (Eat("(")) return Call(name, at, out);
    const ExprScope::Lookup l = scope_.Find(name);
    if (l.kind == 0) {
      pos_ = at;
      return Error("unknown name '" + name + "' (known: " + scope_.KnownNames() +
                   ", and the functions min, max, cdiv, u32, i32)");
    }
    if (l.kind == 3) return Load(*l.buffer, static_cast<int32_t>(l.value), at, out);
    Expr::Node n;
    n.op = l.kind == 1 ? Op::kVar : Op::kConst;
    n.value = l.value;
    *out = Add(n);
    return OkStatus();
  }
  Status Load(const LoadableBuffer& b, int32_t slot, size_t at, int32_t* out) {
    if (!Eat("[")) {
      pos_ = at;
      return Error("buffer '" + b.name + "' needs an index: " + b.name + "[...]");
    }
    Expr::Node n;
    n.op = Op::kLoad;
    n.value = slot;
    MLASIM_RETURN_IF_ERROR(Ternary(&n.a));
    if (!Eat("]")) return Error("expected ']'");
    if (Eat(".")) {
      const size_t fat = pos_;
      const std::string f = Name();
      const auto it = std::find(b.fields.begin(), b.fields.end(), f);
      if (it == b.fields.end()) {
        pos_ = fat;
        std::string known;
        for (const std::string& x : b.fields) known += (known.empty() ? "" : ", ") + x;
        return Error(
            "'" + b.name + "' rows have no field '" + f + "'" +
            (known.empty() ? " (its rows are plain elements)" : " (fields: " + known + ")"));
      }
      n.width = b.row_width;
      n.field = static_cast<int32_t>(it - b.fields.begin());
    }
    *out = Add(n);
    return OkStatus();
  }
  Status Call(const std::string& fn, size_t at, int32_t* out) {
    std::vector<int32_t> args;
    do {
      int32_t a = -1;
      MLASIM_RETURN_IF_ERROR(Ternary(&a));
      args.push_back(a);
    } while (Eat(","));
    if (!Eat(")")) return Error("expected ')' or ','");
    const size_t n = args.size();
    auto arity = [&](size_t want) -> Status {
      if (n == want) return OkStatus();
      pos_ = at;
      return Error(fn + "() takes " + std::to_string(want) + " argument" + (want > 1 ? "s" : ""));
    };
    if (fn == "min" || fn == "max") {
      if (n < 2) {
        pos_ = at;
        return Error(fn + "() takes at least 2 arguments");
      }
      const Op op = fn == "min" ? Op::kMin : Op::kMax;
      *out = args[0];
      for (size_t i = 1; i < n; ++i) *out = Bin(op, *out, args[i]);
      return OkStatus();
    }
    if (fn == "cdiv") {
      MLASIM_RETURN_IF_ERROR(arity(2));
      *out = Bin(Op::kCdiv, args[0], args[1]);
      return OkStatus();
    }
    if (fn == "u32" || fn == "i32") {
      MLASIM_RETURN_IF_ERROR(arity(1));
      Expr::Node node;
      node.op = fn == "u32" ? Op::kU32 : Op::kI32;
      node.a = args[0];
      *out = Add(node);
      return OkStatus();
    }
    pos_ = at;
    return Error("unknown function '" + fn + "' (known: min, max, cdiv, u32, i32)");
  }

  const std::string& t_;
  const ExprScope& scope_;
  const std::string& field_;
  Expr* out_;
  size_t pos_ = 0;
  int depth_ = 0;
};

StatusOr<Expr> Expr::Compile(const std::string& text, const ExprScope& scope,
                             const std::string& field) {
  Expr e;
  e.text_ = text;
  if (text.size() > 4096) return InvalidArgumentError(field, "expression longer than 4096 bytes");
  MLASIM_RETURN_IF_ERROR(ExprParser(text, scope, field, &e).Run());
  MLASIM_RETURN_IF_ERROR(e.Linearize(field));
  return e;
}

Expr Expr::Constant(int64_t v) {
  Expr e;
  Node n;
  n.value = v;
  e.nodes_.push_back(n);
  e.root_ = 0;
  e.code_.push_back(n);
  e.shape_ = Shape::kConst;
  e.text_ = std::to_string(v);
  return e;
}

void Expr::Emit(int32_t i) {
  const Node n = nodes_[i];
  auto jump = [&](Op op) {
    Node j;
    j.op = op;
    code_.push_back(j);
    return code_.size() - 1;
  };
  auto here = [&] { return static_cast<int64_t>(code_.size()); };
  switch (n.op) {
    case Op::kConst:
    case Op::kVar: code_.push_back(n); return;
    case Op::kLoad:
    case Op::kNeg:
    case Op::kNot:
    case Op::kBool:
    case Op::kU32:
    case Op::kI32:
      Emit(n.a);
      code_.push_back(n);
      return;
    case Op::kAnd:
    case Op::kOr: {
      // a && b: [a] JZ F; [b] BOOL; JMP E; F: 0; E:     a || b: [a] JNZ T; [b] BOOL; JMP E; T: 1
      const bool is_and = n.op == Op::kAnd;
      Emit(n.a);
      const size_t skip = jump(is_and ? Op::kJumpIfZero : Op::kJumpIfNonZero);
      Emit(n.b);
      jump(Op::kBool);
      const size_t end = jump(Op::kJump);
      code_[skip].value = here();
      Node k;
      k.value = is_and ? 0 : 1;
      code_.push_back(k);
      code_[end].value = here();
      return;
    }
    case Op::kSelect: {
      Emit(n.a);
      const size_t other = jump(Op::kJumpIfZero);
      Emit(n.b);
      const size_t end = jump(Op::kJump);
      code_[other].value = here();
      Emit(n.c);
      code_[end].value = here();
      return;
    }
    default:
      Emit(n.a);
      Emit(n.b);
      code_.push_back(n);
      return;
  }
}

bool Expr::HasLoad(int32_t i) const {
  if (i < 0) return false;
  const Node& n = nodes_[i];
  return n.op == Op::kLoad || HasLoad(n.a) || HasLoad(n.b) || HasLoad(n.c);
}

namespace {
// Operators whose value is always 0 or 1.
bool IsBoolean(Expr::Op op) {
  using Op = Expr::Op;
  return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe || op == Op::kEq ||
         op == Op::kNe || op == Op::kNot || op == Op::kAnd || op == Op::kOr || op == Op::kBool;
}
// Operators of two values that Expr::Apply evaluates (not && ||: they short-circuit).
bool IsBinary(Expr::Op op) {
  using Op = Expr::Op;
  return op == Op::kAdd || op == Op::kSub || op == Op::kMul || op == Op::kDiv || op == Op::kMod ||
         op == Op::kCdiv || op == Op::kMin || op == Op::kMax || op == Op::kLt || op == Op::kLe ||
         op == Op::kGt || op == Op::kGe || op == Op::kEq || op == Op::kNe;
}
}  // namespace

bool Expr::Fold(int32_t i, int64_t* value) {
  Node& n = nodes_[i];
  auto make_const = [&](int64_t v) {
    n = Node();
    n.value = v;
    *value = v;
    return true;
  };
  auto copy_from = [&](int32_t j) {  // this node becomes node j (already folded)
    n = nodes_[j];
    return n.op == Op::kConst ? (*value = n.value, true) : false;
  };
  int64_t a = 0, b = 0, c = 0;
  switch (n.op) {
    case Op::kConst: *value = n.value; return true;
    case Op::kVar: return false;
    case Op::kLoad: Fold(n.a, &a); return false;
    case Op::kAnd:
    case Op::kOr: {
      const bool ca = Fold(n.a, &a), cb = Fold(n.b, &b);
      const bool is_and = n.op == Op::kAnd;
      if (ca && (is_and ? a == 0 : a != 0)) return make_const(is_and ? 0 : 1);
      if (ca && cb) return make_const(b != 0);
      // x && 0 is 0 and x || 1 is 1 when x loads nothing (a load is a recorded read);
      // x && 1 and x || 0 are x != 0 (x still evaluates, loads included).
      if (cb && (is_and ? b == 0 : b != 0) && !HasLoad(n.a)) return make_const(is_and ? 0 : 1);
      if (cb && (is_and ? b != 0 : b == 0)) {
        n.op = Op::kBool;
        n.b = -1;
        if (IsBoolean(nodes_[n.a].op)) copy_from(n.a);  // already 0 or 1
      }
      return false;
    }
    case Op::kSelect: {
      const bool cc = Fold(n.a, &c);
      const bool ca = Fold(n.b, &a), cb = Fold(n.c, &b);
      (void)ca;
      (void)cb;
      if (cc) return copy_from(c != 0 ? n.b : n.c);
      return false;
    }
    case Op::kBool:
      if (Fold(n.a, &a)) return make_const(a != 0);
      if (IsBoolean(nodes_[n.a].op)) copy_from(n.a);
      return false;
    case Op::kNeg:
    case Op::kNot:
    case Op::kU32:
    case Op::kI32: {
      if (!Fold(n.a, &a)) return false;
      const int64_t v = n.op == Op::kNeg   ? static_cast<int64_t>(0 - static_cast<uint64_t>(a))
                        : n.op == Op::kNot ? a == 0
                        : n.op == Op::kU32
                            ? static_cast<int64_t>(static_cast<uint32_t>(a))
                            : static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(a)));
      return make_const(v);
    }
    default: {
      const bool ca = Fold(n.a, &a), cb = Fold(n.b, &b);
      if (!ca || !cb) return false;
      bool ok = true;
      const int64_t v = Apply(n.op, a, b, &ok);
      if (!ok) return false;  // division by zero stays a run-time undefined value
      return make_const(v);
    }
  }
}

Status Expr::Linearize(const std::string& field) {
  code_.clear();
  int64_t ignored = 0;
  Fold(root_, &ignored);
  Emit(root_);
  // The stack depth the bytecode needs, checked once here so Eval never overflows.
  int depth = 0, max_depth = 0;
  for (const Node& n : code_) {
    switch (n.op) {
      case Op::kConst:
      case Op::kVar: ++depth; break;
      case Op::kLoad:
      case Op::kNeg:
      case Op::kNot:
      case Op::kU32:
      case Op::kI32:
      case Op::kBool:
      case Op::kJump: break;
      case Op::kJumpIfZero:
      case Op::kJumpIfNonZero: --depth; break;
      default: --depth; break;  // binary: two in, one out
    }
    max_depth = std::max(max_depth, depth);
  }
  if (max_depth > kMaxStack)
    return InvalidArgumentError(field, "expression needs more than " + std::to_string(kMaxStack) +
                                           " values at once; split it with let");
  ChooseShape();
  return OkStatus();
}

bool Expr::AsOperand(int32_t i, Operand* out) const {
  const Node& n = nodes_[i];
  if (n.op != Op::kConst && n.op != Op::kVar) return false;
  out->value = n.value;
  out->var = n.op == Op::kVar;
  return true;
}

bool Expr::AsTerm(int32_t i, Term* out) const {
  const Node& n = nodes_[i];
  *out = Term();
  if (AsOperand(i, &out->a)) return true;
  if ((n.op == Op::kNot || n.op == Op::kBool) && AsOperand(n.a, &out->a)) {
    out->op = n.op == Op::kNot ? Op::kEq : Op::kNe;  // against the constant 0 in `b`
    return true;
  }
  if (!IsBinary(n.op) || !AsOperand(n.a, &out->a) || !AsOperand(n.b, &out->b)) return false;
  out->op = n.op;
  return true;
}

// The shape of the folded tree (Expr::Shape), with its terms.
void Expr::ChooseShape() {
  const Node& n = nodes_[root_];
  shape_ = Shape::kGeneric;
  if (n.op == Op::kConst) {
    shape_ = Shape::kConst;
  } else if (AsTerm(root_, &terms_[0])) {
    shape_ = Shape::kTerm;
  } else if (AsLoad(root_)) {
    shape_ = Shape::kLoad;
  } else if (IsBinary(n.op) && nodes_[n.a].op == Op::kLoad) {  // load op term
    if (AsLoad(n.a) && AsTerm(n.b, &terms_[1])) {
      shape_ = Shape::kLoad;
      pair_op_ = n.op;
      load_left_ = true;
    }
  } else if (IsBinary(n.op) && nodes_[n.b].op == Op::kLoad) {  // term op load
    if (AsLoad(n.b) && AsTerm(n.a, &terms_[1])) {
      shape_ = Shape::kLoad;
      pair_op_ = n.op;
      load_left_ = false;
    }
  } else if ((IsBinary(n.op) || n.op == Op::kAnd || n.op == Op::kOr) && AsTerm(n.a, &terms_[0]) &&
             AsTerm(n.b, &terms_[1])) {
    shape_ = Shape::kPair;
    pair_op_ = n.op;
  } else if (n.op == Op::kSelect && AsTerm(n.a, &terms_[0]) && AsTerm(n.b, &terms_[1]) &&
             AsTerm(n.c, &terms_[2])) {
    shape_ = Shape::kSelect;
  }
  if (shape_ == Shape::kGeneric && AsTree()) shape_ = Shape::kTree;
}

// The root as a tree of operands that each have a fast shape (Shape::kTree), if they all do.
// Unary operators stay with the stack machine (and so does `-(-(e))`, what tests compare with).
bool Expr::AsTree() {
  const Node& n = nodes_[root_];
  const bool select = n.op == Op::kSelect;
  if (!select && !IsBinary(n.op) && n.op != Op::kAnd && n.op != Op::kOr) return false;
  std::vector<Expr> children;
  for (const int32_t operand : {n.a, n.b, n.c}) {
    if (operand < 0 || (operand == n.c && !select)) continue;
    Expr child;
    child.nodes_ = nodes_;  // folded already
    child.root_ = operand;
    child.Emit(operand);
    child.ChooseShape();
    if (child.shape_ == Shape::kGeneric) return false;
    children.push_back(std::move(child));
  }
  tree_op_ = n.op;
  children_ = std::move(children);
  return true;
}

Expr Expr::Subtree(int32_t node) const {
  Expr e;
  e.nodes_ = nodes_;
  e.root_ = node;
  e.text_ = text_ + " (a part of it)";
  e.Emit(node);
  e.ChooseShape();
  return e;
}

// A load whose index is a term: its buffer, width, field and index (terms_[0]).
bool Expr::AsLoad(int32_t i) {
  const Node& n = nodes_[i];
  if (n.op != Op::kLoad || !AsTerm(n.a, &terms_[0])) return false;
  load_slot_ = static_cast<int32_t>(n.value);
  load_width_ = n.width;
  load_field_ = n.field;
  return true;
}

bool Expr::LoadsFrom(int32_t buffer) const {
  for (const Node& n : code_)
    if (n.op == Op::kLoad && n.value == buffer) return true;
  return false;
}

bool Expr::AsRowLoad(RowLoad* out) const {
  const Term& index = terms_[0];
  if (shape_ != Shape::kLoad || pair_op_ != Op::kConst || index.op != Op::kConst || !index.a.var)
    return false;
  out->buffer = load_slot_;
  out->index_slot = static_cast<int32_t>(index.a.value);
  out->width = load_width_;
  out->field = load_field_;
  return true;
}

bool Expr::AsOffsetLoad(OffsetLoad* out) const {
  const Term& index = terms_[0];
  if (shape_ != Shape::kLoad) return false;
  OffsetLoad r;
  r.buffer = load_slot_;
  r.width = load_width_;
  r.field = load_field_;
  if (index.op == Op::kConst && index.a.var) {  // v
    r.index_slot = static_cast<int32_t>(index.a.value);
  } else if ((index.op == Op::kAdd || index.op == Op::kSub) && index.a.var && !index.b.var) {
    r.index_slot = static_cast<int32_t>(index.a.value);  // v + k, v - k
    r.offset = index.op == Op::kAdd ? index.b.value
                                    : static_cast<int64_t>(0 - static_cast<uint64_t>(index.b.value));
  } else if (index.op == Op::kAdd && !index.a.var && index.b.var) {  // k + v
    r.index_slot = static_cast<int32_t>(index.b.value);
    r.offset = index.a.value;
  } else {
    return false;
  }
  if (pair_op_ != Op::kConst) {  // L - var
    const Term& t = terms_[1];
    if (pair_op_ != Op::kSub || !load_left_ || t.op != Op::kConst || !t.a.var) return false;
    r.minus_slot = static_cast<int32_t>(t.a.value);
  }
  *out = r;
  return true;
}

bool Expr::AsOneTerm(Term* out) const {
  if (shape_ == Shape::kConst) {
    *out = Term();
    out->a.value = code_[0].value;
    return true;
  }
  if (shape_ != Shape::kTerm) return false;
  *out = terms_[0];
  return true;
}

int64_t Expr::Eval(const int64_t* vars, const uint8_t* var_defined, const Loader& load,
                   bool* defined) const {
  return EvalWith(vars, var_defined, load, defined);
}

}  // namespace mlasim::sim
