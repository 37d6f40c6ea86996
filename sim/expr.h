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

  // Evaluates with variable values `vars` (`var_defined[slot]` == 0 marks a variable whose value
  // is undefined; nullptr: all defined); *defined is false when a variable or a load was undefined
  // or a division by zero happened (the value is then 0).
  int64_t Eval(const int64_t* vars, const uint8_t* var_defined, const Loader& load,
               bool* defined) const;
  bool empty() const { return code_.empty(); }
  bool is_constant() const { return code_.size() == 1 && code_[0].op == Op::kConst; }
  // The value of a constant expression (is_constant()).
  int64_t constant_value() const { return code_[0].value; }
  const std::string& text() const { return text_; }

  enum class Op : uint8_t {
    kConst, kVar, kLoad, kNeg, kNot, kAdd, kSub, kMul, kDiv, kMod, kLt, kLe, kGt, kGe, kEq, kNe,
    kAnd, kOr, kSelect, kMin, kMax, kCdiv, kU32, kI32,
    // bytecode only: jumps (value = target index) and a 0/1 normalisation
    kJumpIfZero, kJumpIfNonZero, kJump, kBool,
  };
  struct Node {
    Op op = Op::kConst;
    int64_t value = 0;   // kConst: value; kVar: slot; kLoad: buffer slot
    int32_t a = -1, b = -1, c = -1;  // operand node indices (kMin/kMax chain pairwise)
    int32_t width = 1, field = 0;    // kLoad: element = index * width + field
  };

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
  Status Linearize(const std::string& field);
  std::vector<Node> nodes_;  // the parse tree
  int32_t root_ = -1;
  std::vector<Node> code_;   // the bytecode
  std::string text_;
};

}  // namespace mlasim::sim
