#include "ir/graph.h"

namespace torchtpu::ir {

const char* const kParameter = "parameter";
const char* const kConstant = "stablehlo.constant";

Value Graph::parameter(Type type) {
  Node n;
  n.op = kParameter;
  n.results.push_back(std::move(type));
  n.param_index = static_cast<int64_t>(param_nodes_.size());
  param_nodes_.push_back(static_cast<int32_t>(nodes_.size()));
  nodes_.push_back(std::move(n));
  return Value{static_cast<int32_t>(nodes_.size() - 1), 0};
}

Value Graph::constant(DType dtype, double value, Dims dims) {
  Node n;
  n.op = kConstant;
  n.results.push_back(Type{dtype, std::move(dims)});
  n.constant = value;
  nodes_.push_back(std::move(n));
  return Value{static_cast<int32_t>(nodes_.size() - 1), 0};
}

Value Graph::add(const char* op, std::vector<Value> operands, Type result,
                 std::vector<Attr> attrs, Body body) {
  Node n;
  n.op = op;
  n.operands = std::move(operands);
  n.results.push_back(std::move(result));
  n.attrs = std::move(attrs);
  n.body = body;
  nodes_.push_back(std::move(n));
  return Value{static_cast<int32_t>(nodes_.size() - 1), 0};
}

void Graph::assign_prefix(const Graph& src, size_t n) {
  nodes_.assign(src.nodes_.begin(), src.nodes_.begin() + static_cast<std::ptrdiff_t>(n));
  param_nodes_.clear();
  for (int32_t i : src.param_nodes_)
    if (static_cast<size_t>(i) < n) param_nodes_.push_back(i);
  outputs.clear();
  donations.clear();
  collectives.clear();
  replicas = src.replicas;
  opt_level = src.opt_level;
}

Value Graph::append(Node n) {
  nodes_.push_back(std::move(n));
  return Value{static_cast<int32_t>(nodes_.size() - 1), 0};
}

std::vector<Value> Graph::add_multi(const char* op, std::vector<Value> operands,
                                    std::vector<Type> results, std::vector<Attr> attrs,
                                    Body body) {
  Node n;
  n.op = op;
  n.operands = std::move(operands);
  n.results = std::move(results);
  n.attrs = std::move(attrs);
  n.body = body;
  int32_t id = static_cast<int32_t>(nodes_.size());
  std::vector<Value> out;
  for (int32_t i = 0; i < static_cast<int32_t>(n.results.size()); ++i) out.push_back({id, i});
  nodes_.push_back(std::move(n));
  return out;
}

}  // namespace torchtpu::ir
