// The graph IR: a list of StableHLO nodes in SSA order. A Graph is built by
// the lowerings, keyed structurally (graph_key.h) and printed to StableHLO text
// (printer.h) only when its key misses the compile cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace torchtpu::ir {

using Dims = std::vector<int64_t>;

struct Type {
  DType dtype = DType::kF32;
  Dims dims;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool operator==(const Type& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

// One result of one node.
struct Value {
  int32_t node = -1;
  int32_t index = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
};

// A node attribute. kI64 prints `name = v : i64`, kI64Array
// `name = array<i64: ...>`, kRaw prints `name = <raw>` verbatim (for
// attributes with their own syntax: comparison directions, dot numbers).
struct Attr {
  enum Kind : uint8_t { kI64, kI64Array, kRaw };
  Kind kind;
  const char* name;
  std::vector<int64_t> ints;
  std::string raw;

  static Attr i64(const char* name, int64_t v) { return {kI64, name, {v}, {}}; }
  static Attr array(const char* name, std::vector<int64_t> v) { return {kI64Array, name, std::move(v), {}}; }
  static Attr text(const char* name, std::string raw) { return {kRaw, name, {}, std::move(raw)}; }
};

// The scalar computation in a reduce / scatter / reduce_window region.
// kReplace returns the second argument (a scatter that overwrites).
// kSortAsc / kSortDesc are stablehlo.sort comparators on the first operand
// with PyTorch's order: NaN above everything ascending and first descending,
// -0.0 equal to 0.0 (ties keep their order when the sort is stable).
enum class Body : uint8_t { kNone, kAdd, kMul, kMax, kMin, kAnd, kOr, kReplace, kSortAsc, kSortDesc, kXor };

class Graph;

struct Node {
  const char* op;  // StableHLO op name; kParameter for graph inputs
  std::vector<Value> operands;
  std::vector<Type> results;
  std::vector<Attr> attrs;
  Body body = Body::kNone;
  int64_t param_index = -1;  // parameters only
  double constant = 0;       // constants only: the splat value
  // stablehlo.while only: the condition and the body, each a self-contained
  // graph whose parameters are the carried values (no outer value is used).
  std::vector<std::shared_ptr<const Graph>> regions;
};

extern const char* const kParameter;
extern const char* const kConstant;

class Graph {
 public:
  Value parameter(Type type);
  // A splat constant. Only structural constants (reduction identities, 0/1):
  // user-provided scalars are parameters so that new values do not recompile.
  Value constant(DType dtype, double value, Dims dims = {});
  Value add(const char* op, std::vector<Value> operands, Type result,
            std::vector<Attr> attrs = {}, Body body = Body::kNone);
  std::vector<Value> add_multi(const char* op, std::vector<Value> operands,
                               std::vector<Type> results, std::vector<Attr> attrs = {},
                               Body body = Body::kNone);

  // Appends a node moved from another graph (operands already remapped);
  // not for parameters. Returns its first result.
  Value append(Node n);
  std::vector<Node>& mutable_nodes() { return nodes_; }
  // Becomes the first `n` nodes of `src` (its parameters among them), with
  // no outputs, donations or collectives: the graph `src` was when it held
  // them.
  void assign_prefix(const Graph& src, size_t n);

  const Type& type(Value v) const { return nodes_[v.node].results[v.index]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(Value v) const { return nodes_[v.node]; }
  int num_parameters() const { return static_cast<int>(param_nodes_.size()); }
  const Type& parameter_type(int i) const { return nodes_[param_nodes_[i]].results[0]; }
  Value parameter_value(int i) const { return Value{param_nodes_[i], 0}; }

  // The values @main returns, in order.
  std::vector<Value> outputs;
  // Parameter indices whose buffers may be donated, each with the output it
  // aliases (tf.aliasing_output).
  std::vector<std::pair<int, int>> donations;
  // Replicas the program runs as (mhlo.num_replicas): more than one only for
  // a program holding collectives over the devices of one client.
  int replicas = 1;
  // XLA's backend (LLVM) optimization level to compile at; 0: XLA's highest
  // (the default). Single-op programs over small tensors take a lower one:
  // they compile faster and run about as fast.
  int opt_level = 0;
  static constexpr int kLightOptLevel = 1;  // the lower level
  // The nodes that are collectives (ops/collective.h), in issue order: Fused
  // Eager runs a program around them in stages when the ranks' programs
  // differ (ir/split.h).
  std::vector<int32_t> collectives;

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> param_nodes_;
};

}  // namespace torchtpu::ir
