// StableHLO text printer: the only producer of MLIR. Prints the generic MLIR
// form, which every StableHLO version parses. Called only on a cache miss.
#pragma once

#include <string>

#include "ir/graph.h"

namespace torchtpu::ir {

std::string print_stablehlo(const Graph& g);

// A node attribute (kRaw) holding whole func.func definitions, in MLIR text,
// that the node calls (a "func.call" of an inlined JAX kernel). It is not
// printed on the node: each distinct text is printed once at module level,
// after @main. Being an attribute, it is part of the graph key.
extern const char* const kFunctionsAttr;

// MLIR tensor type text, e.g. "tensor<2x3xf32>".
std::string tensor_type(const Type& t);

}  // namespace torchtpu::ir
