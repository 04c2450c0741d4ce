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

std::string collective_module(Collective kind, Reduction reduction, ir::DType dtype, int64_t numel, int replicas) {
  if (replicas < 1) throw std::invalid_argument("collective: no replicas");
  if ((kind == Collective::kReduceScatter || kind == Collective::kAllToAll) && numel % replicas != 0)
    throw std::invalid_argument(std::string(collective_name(kind)) + ": " + std::to_string(numel) +
                                " elements do not split into " + std::to_string(replicas) + " equal chunks");
  int64_t out = numel;
  if (kind == Collective::kAllGather) out = numel * replicas;
  if (kind == Collective::kReduceScatter) out = numel / replicas;
  const std::string in_t = tensor(numel, dtype), out_t = tensor(out, dtype);
  const std::string scalar = std::string("tensor<") + ir::mlir_name(dtype) + ">";

  std::ostringstream groups;
  groups << "replica_groups = dense<[[";
  for (int r = 0; r < replicas; ++r) groups << (r ? ", " : "") << r;
  groups << "]]> : tensor<1x" << replicas << "xi64>";

  std::ostringstream m;
  m << "module @collective attributes {mhlo.num_replicas = " << replicas << " : i32, mhlo.num_partitions = 1 : i32} {\n"
    << "  func.func public @main(%arg0: " << in_t << ") -> " << out_t << " {\n";
  const std::string region = "({\n  ^bb0(%a: " + scalar + ", %b: " + scalar + "):\n    %c = " +
                             combiner(reduction, dtype) + " %a, %b : " + scalar + "\n    stablehlo.return %c : " +
                             scalar + "\n  })";
  switch (kind) {
    case Collective::kAllReduce:
      m << "    %0 = \"stablehlo.all_reduce\"(%arg0) " << region << " {" << groups.str() << "}";
      break;
    case Collective::kReduceScatter:
      m << "    %0 = \"stablehlo.reduce_scatter\"(%arg0) " << region << " {scatter_dimension = 0 : i64, "
        << groups.str() << "}";
      break;
    case Collective::kAllGather:
      m << "    %0 = \"stablehlo.all_gather\"(%arg0) {all_gather_dim = 0 : i64, " << groups.str() << "}";
      break;
    case Collective::kAllToAll:
      m << "    %0 = \"stablehlo.all_to_all\"(%arg0) {split_dimension = 0 : i64, concat_dimension = 0 : i64, "
        << "split_count = " << replicas << " : i64, " << groups.str() << "}";
      break;
  }
  m << " : (" << in_t << ") -> " << out_t << "\n"
    << "    return %0 : " << out_t << "\n  }\n}\n";
  return m.str();
}

}  // namespace torchtpu::ops
