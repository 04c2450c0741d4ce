// OpMemo: the graph a foreach op built for one call, handed to the mode
// again for a later call with identical arguments, so PyTorch's per-tensor
// loop and the per-tensor kernels do not run again (an optimizer calls the
// same foreach ops over the same tensors every step; building their graphs
// was most of its host time). What the mode does with the graph (one Strict
// program, one Fused append, donation, buckets) is unchanged, so results are
// exactly those of building it anew.
//
// The key holds everything a kernel's graph can depend on: the op; per
// tensor its device, dtype, sizes, strides and offset; which tensors share a
// storage; per storage its size, stored dtype and whether it holds a value;
// the exact value of every other argument; the float32 matmul precision.
// Only calls whose arguments are all tpu tensors (no CPU scalars, read on
// the host), tensor lists, numbers, number lists and None are keyed; only
// graphs that read and write nothing but the call's own storages, draw no
// random keys and hold no device-side checks are recorded. Bounded: the
// table is emptied when it holds kMaxEntries.
//
// A float argument that changes between calls (Adam's bias-corrected step
// sizes) is free once shown to be a runtime scalar of the graph: two calls
// that differ only in it built the same graph, whose scalar parameters
// differ exactly where that argument does, holding its values. Later calls
// then take the graph with their own values at those parameters. Values a
// kernel may treat specially (0, +-1, +-2, +-0.5, NaN, Inf) are never
// taken for a free argument: a call holding one builds its graph.
#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "eager/op_graph.h"

namespace torchtpu::aten {

class OpMemo {
 public:
  static constexpr size_t kMaxEntries = 512;

  // One call's key (all but the values of numbers), the values of its
  // numbers in argument order, and its storages, each once, in argument order.
  struct Call {
    bool ok = false;  // every argument could be keyed
    int device = 0;
    uint64_t hash = 0;
    std::vector<int64_t> words;
    std::vector<eager::HostScalar> values;
    std::vector<eager::StorageValue*> storages;
  };
  // Whether memoized graphs are used and recorded (TORCHTPU_OP_MEMO).
  static bool enabled();
  static void set_enabled(bool on);
  // The key of op `name`'s `n` arguments on top of `stack`, on `device`.
  static Call key(const char* name, int device, const torch::jit::Stack& stack, size_t n);
  // The graph recorded for `call`, with the call's storages, or none.
  static std::optional<eager::OpGraph::Built> find(const Call& call);
  // Keeps what `call` built, unless it reads or writes a storage that is
  // not one of the call's or draws random keys; frees the float arguments
  // it shows to be runtime scalars.
  static void record(const Call& call, const eager::OpGraph::Built& built);
  // Calls answered from the table, and graphs recorded (debug.metrics()).
  static int64_t hits();
  static int64_t records();
  static void reset_counts();
  static void clear();
};

}  // namespace torchtpu::aten
