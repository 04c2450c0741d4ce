#include "ops/collective.h"

#include <sstream>
#include <stdexcept>

namespace torchtpu::ops {
namespace {


// The body of the reduction region: the elementwise op combining two values.
std::string combiner(Reduction r, ir::DType dtype) {
  std::string n = ir::mlir_name(dtype);
  if (n == "i1") return r == Reduction::kSum || r == Reduction::kMax ? "stablehlo.or" : "stablehlo.and";
  switch (r) {
    case Reduction::kSum: return "stablehlo.add";
    case Reduction::kProduct: return "stablehlo.multiply";
    case Reduction::kMin: return "stablehlo.minimum";
    case Reduction::kMax: return "stablehlo.maximum";
  }
  throw std::invalid_argument("collective: unknown reduction");
}

std::string tensor(int64_t n, ir::DType dtype) {
  return "tensor<" + std::to_string(n) + "x" + ir::mlir_name(dtype) + ">";
}

}  // namespace

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
  }
  return "collective";
}

namespace {

// The elements each replica gets back, checking that the input splits.
int64_t result_numel(Collective kind, int64_t numel, int replicas) {
  if (replicas < 1) throw std::invalid_argument("collective: no replicas");
  if ((kind == Collective::kReduceScatter || kind == Collective::kAllToAll) && numel % replicas != 0)
    throw std::invalid_argument(std::string(collective_name(kind)) + ": " + std::to_string(numel) +
                                " elements do not split into " + std::to_string(replicas) + " equal chunks");
  if (kind == Collective::kAllGather) return numel * replicas;
  if (kind == Collective::kReduceScatter) return numel / replicas;
  return numel;
}

std::string replica_groups(int replicas) {
  std::ostringstream groups;
  groups << "dense<[[";
  for (int r = 0; r < replicas; ++r) groups << (r ? ", " : "") << r;
  groups << "]]> : tensor<1x" << replicas << "xi64>";
  return groups.str();
}

}  // namespace

std::string collective_module(Collective kind, Reduction reduction, ir::DType dtype, int64_t numel, int replicas) {
  const int64_t out = result_numel(kind, numel, replicas);
  const std::string in_t = tensor(numel, dtype), out_t = tensor(out, dtype);
  const std::string scalar = std::string("tensor<") + ir::mlir_name(dtype) + ">";
  const std::string groups = "replica_groups = " + replica_groups(replicas);

  std::ostringstream m;
  m << "module @collective attributes {mhlo.num_replicas = " << replicas << " : i32, mhlo.num_partitions = 1 : i32} {\n"
    << "  func.func public @main(%arg0: " << in_t << ") -> " << out_t << " {\n";
  const std::string region = "({\n  ^bb0(%a: " + scalar + ", %b: " + scalar + "):\n    %c = " +
                             combiner(reduction, dtype) + " %a, %b : " + scalar + "\n    stablehlo.return %c : " +
                             scalar + "\n  })";
  switch (kind) {
    case Collective::kAllReduce:
      m << "    %0 = \"stablehlo.all_reduce\"(%arg0) " << region << " {" << groups << "}";
      break;
    case Collective::kReduceScatter:
      m << "    %0 = \"stablehlo.reduce_scatter\"(%arg0) " << region << " {scatter_dimension = 0 : i64, "
        << groups << "}";
      break;
    case Collective::kAllGather:
      m << "    %0 = \"stablehlo.all_gather\"(%arg0) {all_gather_dim = 0 : i64, " << groups << "}";
      break;
    case Collective::kAllToAll:
      m << "    %0 = \"stablehlo.all_to_all\"(%arg0) {split_dimension = 0 : i64, concat_dimension = 0 : i64, "
        << "split_count = " << replicas << " : i64, " << groups << "}";
      break;
  }
  m << " : (" << in_t << ") -> " << out_t << "\n"
    << "    return %0 : " << out_t << "\n  }\n}\n";
  return m.str();
}

ir::Value collective_node(ir::Graph& g, Collective kind, Reduction reduction, ir::Value x, int replicas) {
  const ir::Type in = g.type(x);
  if (in.rank() != 1) throw std::invalid_argument(std::string(collective_name(kind)) + ": takes a flat value");
  const ir::Type out{in.dtype, {result_numel(kind, in.dims[0], replicas)}};
  std::vector<ir::Attr> attrs;
  ir::Body body = ir::Body::kNone;
  const bool is_bool = in.dtype == ir::DType::kBool;
  switch (reduction) {
    case Reduction::kSum: body = is_bool ? ir::Body::kOr : ir::Body::kAdd; break;
    case Reduction::kProduct: body = is_bool ? ir::Body::kAnd : ir::Body::kMul; break;
    case Reduction::kMin: body = is_bool ? ir::Body::kAnd : ir::Body::kMin; break;
    case Reduction::kMax: body = is_bool ? ir::Body::kOr : ir::Body::kMax; break;
  }
  const char* op = nullptr;
  switch (kind) {
    case Collective::kAllReduce: op = "stablehlo.all_reduce"; break;
    case Collective::kReduceScatter:
      op = "stablehlo.reduce_scatter";
      attrs.push_back(ir::Attr::i64("scatter_dimension", 0));
      break;
    case Collective::kAllGather:
      op = "stablehlo.all_gather";
      attrs.push_back(ir::Attr::i64("all_gather_dim", 0));
      body = ir::Body::kNone;
      break;
    case Collective::kAllToAll:
      op = "stablehlo.all_to_all";
      attrs.push_back(ir::Attr::i64("split_dimension", 0));
      attrs.push_back(ir::Attr::i64("concat_dimension", 0));
      attrs.push_back(ir::Attr::i64("split_count", replicas));
      body = ir::Body::kNone;
      break;
  }
  attrs.push_back(ir::Attr::text("replica_groups", replica_groups(replicas)));
  const ir::Value y = g.add(op, {x}, out, std::move(attrs), body);
  g.collectives.push_back(y.node);
  return y;
}

}  // namespace torchtpu::ops
