// File: sim/expr.h
//
// The integer expressions of kernel contracts (docs/contracts.md, "Expressions"): what a contract
// writes where a kernel computes a row, a loop bound or a condition, e.g.
// `work_info[w].qo_start + tile_rows`, `kv_len > 0 || zero_kv_reads_q`, `work_indptr[c + 1]`.
//
// Grammar (C precedence; 64-bit signed arithmetic):
//   expr  := or ('?' expr ':' expr)?
//   or    := and ('||' and)*          and := cmp ('&&' cmp)*
//   cmp   := add (('<' | '<=' | '>' | '>=' | '==' | '!=') add)?
//   add   := mul (('+' | '-') mul)*     mul := unary (('*' | '/' | '%') unary)*
//   unary := ('-' | '!') unary | post
//   post  := prim ('[' expr ']' ('.' field)?)?
//   prim  := integer | name | fn '(' expr (',' expr)* ')' | '(' expr ')'
//   fn    := min | max (2+ arguments) | cdiv (ceil division) | u32 | i32 (wrap to 32 bits)
// `buf[i]` loads int32 element i of a buffer the call passes; `buf[r].field` loads a named field
// of row r (work_info[w].kv_end). A load of an element no call wrote, or past the buffer, makes the
// whole expression undefined; the executor records the load itself as a read of that element, so
// the finding is reported where the kernel would read garbage.
#pragma once

#include <cstdint>
#include <limits>

#include <string>
#include <vector>

#include "ref/status.h"

namespace mlasim::sim {

// An int32 buffer an expression may load from: its name, row width in elements, and field names
// of a row (empty when rows are plain elements).
struct LoadableBuffer {
  std::string name;
  int32_t row_width = 1;
  std::vector<std::string> fields;
};

// Names an expression may use, resolved when it is compiled: variables (slot numbers into the
// values array given to Eval), constants (folded in) and loadable buffers (slot numbers into the
// loader's buffers).
class ExprScope {
 public:
  // Declares `name` as variable slot `slot`; a later declaration of the same name shadows it.
  void Var(const std::string& name, int32_t slot);
  void Const(const std::string& name, int64_t value);
  void Buffer(const LoadableBuffer& b, int32_t slot);

  // What a name means here (kind 0 = unknown, 1 = variable, 2 = constant, 3 = buffer).
  struct Lookup {
    int kind = 0;
    int64_t value = 0;  // slot, constant value or buffer slot
    const LoadableBuffer* buffer = nullptr;
  };
  Lookup Find(const std::string& name) const;
  // Every name in scope, sorted, for "unknown name" errors.
  std::string KnownNames() const;

 private:
  struct Entry {
    std::string name;
    Lookup what;
  };
  std::vector<Entry> entries_;
  std::vector<LoadableBuffer> buffers_;  // the declared buffers, in entry order
};

// The result of a load: the value, and whether it is defined.
struct LoadResult {
  int32_t value = 0;
  bool defined = false;
};

// Loads element `element` of buffer slot `buffer` (and records the read). Called by Eval with
// the context pointer it was given (a plain function pointer: this is the simulator's hot path).
struct Loader {
  LoadResult (*fn)(void* ctx, int32_t buffer, int64_t element) = nullptr;
  void* ctx = nullptr;
  LoadResult operator()(int32_t buffer, int64_t element) const { return fn(ctx, buffer, element); }
};

class Expr {
 public:
  Expr() = default;
  // Compiles `text` in `scope`. Errors: InvalidArgument(field, reason) for a syntax error (with
  // the character offset), an unknown name (listing the known ones), a field a buffer does not
  // have, a wrong argument count, or an expression nested deeper than 64 levels.
  static StatusOr<Expr> Compile(const std::string& text, const ExprScope& scope,
                                const std::string& field);
  // A constant expression.
  static Expr Constant(int64_t v);

  // The same with any callable `load(buffer, element) -> LoadResult`, inlined into the
  // interpreter (the simulator's executor uses this on its hot path).
  template <class LoadF>
  int64_t EvalWith(const int64_t* vars, const uint8_t* var_defined, LoadF&& load,
                   bool* defined) const;
  // Evaluates with variable values `vars` (`var_defined[slot]` == 0 marks a variable whose value
  // is undefined; nullptr: all defined); *defined is false when a variable or a load was undefined
  // or a division by zero happened (the value is then 0).
  int64_t Eval(const int64_t* vars, const uint8_t* var_defined, const Loader& load,
               bool* defined) const;
  // Constants and lone variables, the most common operands in contracts (a loop from 0, rows
  // [qo_start, qo_end)), evaluated where they are used: the value and definedness Eval gives,
  // without its dispatch. Returns false, touching nothing, for any other shape.
  bool EvalSimple(const int64_t* vars, const uint8_t* var_defined, int64_t* value,
                  bool* defined) const {
    if (shape_ == Shape::kConst) {
      *defined = true;
      *value = code_[0].value;
      return true;
    }
    if (shape_ != Shape::kTerm || terms_[0].op != Op::kConst) return false;
    bool ok = true;
    const int64_t v = Value(terms_[0].a, vars, var_defined, &ok);
    *defined = ok;
    *value = ok ? v : 0;
    return true;
  }
  bool empty() const { return code_.empty(); }
  bool is_constant() const { return code_.size() == 1 && code_[0].op == Op::kConst; }
  // The value of a constant expression (is_constant()).
  int64_t constant_value() const { return code_[0].value; }
  const std::string& text() const { return text_; }

  enum class Op : uint8_t {
    kConst,
    kVar,
    kLoad,
    kNeg,
    kNot,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod,
    kLt,
    kLe,
    kGt,
    kGe,
    kEq,
    kNe,
    kAnd,
    kOr,
    kSelect,
    kMin,
    kMax,
    kCdiv,
    kU32,
    kI32,
    // bytecode only: jumps (value = target index); a 0/1 normalisation (also from folding)
    kJumpIfZero,
    kJumpIfNonZero,
    kJump,
    kBool,
  };
  // A variable slot or a constant: an operand of the shapes below.
  struct Operand {
    int64_t value = 0;  // the constant, or the variable's slot
    bool var = false;
  };
  // `a op b` on two operands (op kConst: `a` alone); !a and bool(a) are a == 0 and a != 0.
  struct Term {
    Op op = Op::kConst;
    Operand a, b;
  };
  // The shapes most contract expressions have after folding, evaluated without the stack
  // machine: kTerm t[0]; kPair t[0] pair_op t[1] (a binary operator, && or ||); kSelect
  // t[0] ? t[1] : t[2]; kLoad `L` = buffer `load_slot`, element t[0] * width + field, alone
  // (pair_op kConst) or with a binary operator: L pair_op t[1] (load_left) or t[1] pair_op L.
  // kTree: a binary operator, && || or ?: whose operands (children_) have fast shapes of their
  // own (or are trees): `c ? kv_end * page : (kv_end - 1) * page + kv_last_page_lens[b]`.
  enum class Shape : uint8_t { kConst, kTerm, kPair, kSelect, kLoad, kTree, kGeneric };
  // How Eval evaluates this expression (kGeneric: the stack machine).
  Shape shape() const { return shape_; }
  // A load of a field of row `index_slot` (`work_info[w].kv_end`): what a run of such lets
  // needs to be run as one row load (sim/contract.h LetRow).
  struct RowLoad {
    int32_t buffer = -1, index_slot = -1, width = 1, field = 0;
  };
  // This expression as such a load, if it is one (the index a variable, no arithmetic).
  bool AsRowLoad(RowLoad* out) const;
  // A load `buffer[index_slot + offset]` (element (index + offset) * width + field; the index
  // written `v`, `v + k`, `k + v` or `v - k`), alone or minus a variable (`reduce_indptr[t + 1]
  // - first`: minus_slot, else -1): a bound of a CSR walk (sim/contract.h CsrWalk).
  struct OffsetLoad {
    int32_t buffer = -1, index_slot = -1, width = 1, field = 0, minus_slot = -1;
    int64_t offset = 0;
  };
  // This expression as such a load, if it is one.
  bool AsOffsetLoad(OffsetLoad* out) const;
  // This expression as one term on variables and constants (a constant, a variable, `a op b`),
  // if it is one (Shape kConst or kTerm).
  bool AsOneTerm(Term* out) const;
  // Whether the expression loads from buffer slot `buffer` on any path (a side of && || ?: that
  // a given evaluation does not take included).
  bool LoadsFrom(int32_t buffer) const;
  struct Node {
    Op op = Op::kConst;
    int64_t value = 0;               // kConst: value; kVar: slot; kLoad: buffer slot
    int32_t a = -1, b = -1, c = -1;  // operand node indices (kMin/kMax chain pairwise)
    int32_t width = 1, field = 0;    // kLoad: element = index * width + field
  };
  // The folded parse tree (what sim/flat.h compiles) and its root (-1: an empty expression).
  const std::vector<Node>& nodes() const { return nodes_; }
  int32_t root() const { return root_; }
  // The subtree at `node` of the folded tree as an expression of its own (sim/flat.h hoists
  // sub-expressions over launch variables with it).
  Expr Subtree(int32_t node) const;

 private:
  friend class ExprParser;
  // The tree as postfix bytecode with jumps for && || ?: (short-circuit: the side not taken
  // loads nothing). Evaluated with a stack of at most kMaxStack values.
  static constexpr int kMaxStack = 64;
  void Emit(int32_t node);
  // Folds constant subtrees (and && || ?: whose deciding side is constant), so that contract
  // switches such as zero_kv_writes_output cost nothing at run time. Returns the node's value
  // when the node is constant.
  bool Fold(int32_t node, int64_t* value);
  bool HasLoad(int32_t node) const;
  bool AsOperand(int32_t node, Operand* out) const;
  bool AsTerm(int32_t node, Term* out) const;
  bool AsLoad(int32_t node);
  void ChooseShape();
  bool AsTree();
  Status Linearize(const std::string& field);
  template <class LoadF>
  [[gnu::noinline]] int64_t EvalStack(const int64_t* vars, const uint8_t* var_defined, LoadF& load,
                                      bool* defined) const;
  static int64_t Value(const Operand& o, const int64_t* vars, const uint8_t* var_defined,
                       bool* ok) {
    if (!o.var) return o.value;
    if (var_defined && !var_defined[o.value]) *ok = false;
    return vars[o.value];
  }
  static int64_t EvalTerm(const Term& t, const int64_t* vars, const uint8_t* var_defined,
                          bool* ok) {
    const int64_t a = Value(t.a, vars, var_defined, ok);
    if (t.op == Op::kConst) return a;
    return Apply(t.op, a, Value(t.b, vars, var_defined, ok), ok);
  }
  std::vector<Node> nodes_;  // the parse tree
  int32_t root_ = -1;
  std::vector<Node> code_;  // the bytecode
  Shape shape_ = Shape::kGeneric;
  Op pair_op_ = Op::kConst;  // kPair
  Term terms_[3];            // kTerm, kPair, kSelect, kLoad (the index)
  int32_t load_slot_ = 0, load_width_ = 1, load_field_ = 0;  // kLoad
  bool load_left_ = true;                                    // kLoad with pair_op
  Op tree_op_ = Op::kConst;                                  // kTree: the root's operator
  std::vector<Expr> children_;                               // kTree: its operands, in order
  std::string text_;
  // + - * < <= > >= == != min max on two values (arithmetic wraps like 64-bit kernel integers).
  static int64_t ApplyBinary(Op op, int64_t a, int64_t b) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
      case Op::kAdd: return static_cast<int64_t>(ua + ub);
      case Op::kSub: return static_cast<int64_t>(ua - ub);
      case Op::kMul: return static_cast<int64_t>(ua * ub);
      case Op::kLt: return a < b;
      case Op::kLe: return a <= b;
      case Op::kGt: return a > b;
      case Op::kGe: return a >= b;
      case Op::kEq: return a == b;
      case Op::kNe: return a != b;
      case Op::kMin: return a < b ? a : b;
      case Op::kMax: return a < b ? b : a;
      default: return 0;
    }
  }
  // ApplyBinary, and / % cdiv: division by zero (or INT64_MIN / -1) clears *ok (the value is 0).
  static int64_t Apply(Op op, int64_t a, int64_t b, bool* ok) {
    if (op != Op::kDiv && op != Op::kMod && op != Op::kCdiv) return ApplyBinary(op, a, b);
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) {
      *ok = false;
      return 0;
    }
    if (op == Op::kDiv) return a / b;
    if (op == Op::kMod) return a % b;
    return a / b + ((a % b != 0) && ((a > 0) == (b > 0)));
  }
};

template <class LoadF>
inline int64_t Expr::EvalWith(const int64_t* vars, const uint8_t* var_defined, LoadF&& load,
                              bool* defined) const {
  int64_t v = 0;
  if (EvalSimple(vars, var_defined, &v, defined)) return v;
  bool ok = true;
  switch (shape_) {
    case Shape::kConst: *defined = true; return code_[0].value;
    case Shape::kTerm: v = EvalTerm(terms_[0], vars, var_defined, &ok); break;
    case Shape::kPair: {
      // && and ||: the right side is evaluated only when the left one does not decide.
      const int64_t a = EvalTerm(terms_[0], vars, var_defined, &ok);
      if (!ok) break;
      if (pair_op_ == Op::kAnd || pair_op_ == Op::kOr) {
        v = pair_op_ == Op::kOr;
        if ((a != 0) != (pair_op_ == Op::kOr)) v = EvalTerm(terms_[1], vars, var_defined, &ok) != 0;
        break;
      }
      v = Apply(pair_op_, a, EvalTerm(terms_[1], vars, var_defined, &ok), &ok);
      break;
    }
    case Shape::kSelect: {
      const int64_t c = EvalTerm(terms_[0], vars, var_defined, &ok);
      if (ok) v = EvalTerm(terms_[c != 0 ? 1 : 2], vars, var_defined, &ok);
      break;
    }
    case Shape::kLoad: {
      // Nothing is loaded when a value evaluated before the load (postfix order) is undefined.
      const bool pair = pair_op_ != Op::kConst;
      const int64_t left = pair && !load_left_ ? EvalTerm(terms_[1], vars, var_defined, &ok) : 0;
      const int64_t idx = EvalTerm(terms_[0], vars, var_defined, &ok);
      if (!ok) break;
      const LoadResult r = load(load_slot_, idx * load_width_ + load_field_);
      ok = r.defined;
      v = r.value;
      if (!pair) break;
      v = load_left_ ? Apply(pair_op_, v, EvalTerm(terms_[1], vars, var_defined, &ok), &ok)
                     : Apply(pair_op_, left, v, &ok);
      break;
    }
    case Shape::kTree: {
      // As the stack machine: operands left to right, the side of && || ?: not taken is not
      // evaluated, and the first undefined operand makes the value undefined (nothing after it
      // is loaded).
      bool d = true;
      const int64_t a = children_[0].EvalWith(vars, var_defined, load, &d);
      if (!d) {
        ok = false;
        break;
      }
      if (tree_op_ == Op::kSelect) {
        v = children_[a != 0 ? 1 : 2].EvalWith(vars, var_defined, load, &ok);
      } else if (tree_op_ == Op::kAnd || tree_op_ == Op::kOr) {
        v = tree_op_ == Op::kOr;
        if ((a != 0) != (tree_op_ == Op::kOr))
          v = children_[1].EvalWith(vars, var_defined, load, &ok) != 0;
      } else {
        const int64_t b = children_[1].EvalWith(vars, var_defined, load, &ok);
        if (ok) v = Apply(tree_op_, a, b, &ok);
      }
      break;
    }
    case Shape::kGeneric: return EvalStack(vars, var_defined, load, defined);
  }
  *defined = ok;
  return ok ? v : 0;
}

template <class LoadF>
int64_t Expr::EvalStack(const int64_t* vars, const uint8_t* var_defined, LoadF& load,
                        bool* defined) const {
  const size_t n = code_.size();
  int64_t st[kMaxStack];
  int sp = 0;
  bool ok = true;
  for (size_t pc = 0; pc < n; ++pc) {
    const Node& x = code_[pc];
    switch (x.op) {
      case Op::kConst: st[sp++] = x.value; break;
      case Op::kVar:
        if (var_defined && !var_defined[x.value]) ok = false;
        st[sp++] = vars[x.value];
        break;
      case Op::kLoad: {
        const int64_t idx = st[sp - 1];
        if (!ok) {
          st[sp - 1] = 0;
          break;
        }
        const LoadResult r = load(static_cast<int32_t>(x.value), idx * x.width + x.field);
        if (!r.defined) ok = false;
        st[sp - 1] = r.value;
        break;
      }
      case Op::kNeg:
        st[sp - 1] = static_cast<int64_t>(0 - static_cast<uint64_t>(st[sp - 1]));
        break;
      case Op::kNot: st[sp - 1] = st[sp - 1] == 0; break;
      case Op::kBool: st[sp - 1] = st[sp - 1] != 0; break;
      case Op::kU32: st[sp - 1] = static_cast<int64_t>(static_cast<uint32_t>(st[sp - 1])); break;
      case Op::kI32:
        st[sp - 1] = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(st[sp - 1])));
        break;
      case Op::kJump: pc = static_cast<size_t>(x.value) - 1; break;
      case Op::kJumpIfZero:
        if (st[--sp] == 0) pc = static_cast<size_t>(x.value) - 1;
        break;
      case Op::kJumpIfNonZero:
        if (st[--sp] != 0) pc = static_cast<size_t>(x.value) - 1;
        break;
      default: {
        const int64_t b = st[--sp];
        st[sp - 1] = Apply(x.op, st[sp - 1], b, &ok);
      }
    }
  }
  *defined = ok;
  return ok ? st[0] : 0;
}

}  // namespace mlasim::sim
