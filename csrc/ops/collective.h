// Lowerings of c10d collectives to StableHLO collectives, one program each.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace torchtpu::ops {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
enum class Reduction { kSum, kProduct, kMin, kMax };

// The StableHLO module of one collective over `replicas` replicas (one per
// rank, all in one group), whose every replica passes a flat tensor of
// `numel` elements of `dtype`:
//   all_reduce      numel -> numel
//   all_gather      numel -> numel * replicas   (rank order)
//   reduce_scatter  numel -> numel / replicas   (rank r gets chunk r)
//   all_to_all      numel -> numel              (chunk j of rank r to rank j, at r)
// Booleans reduce with or (sum, max) and and (product, min).
std::string collective_module(Collective kind, Reduction reduction, ir::DType dtype, int64_t numel, int replicas);

const char* collective_name(Collective kind);

// The same collective as a node of a larger program (one replicated over
// `replicas` devices, ir::Graph::replicas): `x` is the flat value of this
// replica, the result its flat output, as in collective_module.
ir::Value collective_node(ir::Graph& g, Collective kind, Reduction reduction, ir::Value x, int replicas);

}  // namespace torchtpu::ops
