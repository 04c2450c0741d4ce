// StableHLO text printer: the only producer of MLIR. Prints the generic MLIR
// form, which every StableHLO version parses. Called only on a cache miss.
#pragma once

#include <string>

#include "ir/graph.h"

namespace torchtpu::ir {

std::string print_stablehlo(const Graph& g);

// MLIR tensor type text, e.g. "tensor<2x3xf32>".
std::string tensor_type(const Type& t);

}  // namespace torchtpu::ir
