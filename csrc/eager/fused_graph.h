// FusedGraph: a device's pending graph in Fused Eager. Each op's graph is
// appended (its parameters become the storages' pending values or new
// parameters); storages written here hold pending values until the graph is
// materialized at a sync point, a loop boundary or the size limit. Only
// storages still alive then become outputs; a parameter whose storage died
// or was overwritten is donated to a same-typed output. Guarded by the
// device lock.
#pragma once

#include <vector>

#include "eager/executor.h"
#include "eager/loop_detector.h"
#include "eager/op_graph.h"

namespace torchtpu::eager {

class FusedGraph {
 public:
  explicit FusedGraph(int device);
  enum class Reason { kSync, kLoop, kSize };

  // Appends one op's graph; may materialize (loop boundary, size limit).
  void append(ir::Graph& op, const std::vector<OpGraph::Input>& inputs,
              const std::vector<OpGraph::Output>& outputs, const OpSite& site);
  // Queues the pending graph as one program (nothing if it is empty).
  void flush(Reason why);
  // A storage died: it will not be an output.
  void forget(StorageValue* s);
  uint64_t generation() const { return gen_; }
  int64_t pending_ops() const { return ops_; }
  LoopDetector& loop() { return loop_; }

 private:
  void reset();
  int device_;
  uint64_t gen_;
  ir::Graph g_;
  std::vector<Task::Arg> args_;
  std::vector<bool> arg_free_;  // the argument's storage died or was overwritten
  std::vector<StorageValue*> written_;  // null once dead
  std::vector<OpSite> sites_;
  int64_t ops_ = 0;
  LoopDetector loop_;
};

// The op count at which a fused graph is cut when no loop is found.
void set_fused_max_ops(int64_t n);
int64_t fused_max_ops();

}  // namespace torchtpu::eager
