// FusedGraph: a device's pending work in Fused Eager. Each op's graph is
// appended (its parameters become the storages' pending values or new
// parameters); storages written here hold pending values until the graph is
// materialized at a sync point, a loop boundary or the size limit. Only
// storages still alive then become outputs; a parameter whose storage died
// or was overwritten is donated to a same-typed output. Guarded by the
// device lock.
//
// Each issuing thread (a backward op's issuer is its forward op's thread)
// has its own pending graph, so one thread's failing work never fails the
// values of another: an op that touches a storage pending in another
// thread's graph materializes that graph first. An op whose issuer is
// unknown joins the graph holding its inputs.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "eager/executor.h"
#include "eager/loop_detector.h"
#include "eager/op_graph.h"

namespace torchtpu::eager {

class FusedGraph {
 public:
  // `capture`: the graph of a compiled function (capture.h): one pending
  // graph whatever the issuer, never cut at loops or sizes.
  explicit FusedGraph(int device, bool capture = false) : device_(device), capture_(capture) {}
  enum class Reason { kSync, kLoop, kSize };

  // Appends one op's graph; may materialize (loop boundary, size limit).
  void append(ir::Graph& op, const std::vector<OpGraph::Input>& inputs,
              const std::vector<OpGraph::Output>& outputs, const OpSite& site);
  // Queues every pending graph, each as one program (nothing if empty).
  void flush(Reason why);
  // Queues the pending graph of thread `issuer` (every one for kAnyIssuer).
  void flush_issuer(uint64_t issuer);
  // Queues the pending graph that computes storage `s`, if any.
  void flush_for(const StorageValue* s);
  // The collective just appended (the last of the graph computing `result`)
  // belongs to `call`'s group: the program runs with the other ranks'.
  void join_group(const StorageValue* result, CollectiveCall call);
  // Queues the pending graphs that hold collectives (another rank waits for them).
  void flush_groups();
  // Nanoseconds since an op was last appended to a graph holding
  // collectives (any thread; no lock needed).
  int64_t idle_ns() const;
  // A capture's pending graph as such a task (null if empty).
  std::unique_ptr<Task> take_pending() {
    return pending_.empty() ? nullptr : make_task(*pending_.front(), Reason::kSync);
  }
  // A storage died: it will not be an output.
  void forget(StorageValue* s);
  int64_t pending_ops() const;
  // Whether `s` is pending in, or a parameter of, one of these graphs.
  bool holds(const StorageValue* s) const { return owner(s) != nullptr; }

  // The pending graph of a capture, taken whole instead of queued: its
  // nodes, its arguments (with the storage each came from, null for scalars
  // and for storages that died or were overwritten) and the storages it
  // wrote that are still alive.
  struct Taken {
    ir::Graph graph;
    std::vector<Task::Arg> args;
    std::vector<StorageValue*> arg_storage;
    std::vector<RedrawRef> arg_redraw;  // scalars drawn again on each run
    std::vector<StorageValue*> written;
    std::vector<OpSite> sites;
    int64_t ops = 0;
  };
  Taken take();

 private:
  struct Pending {
    explicit Pending(uint64_t issuer);
    void reset();
    uint64_t issuer;
    uint64_t gen;
    ir::Graph g;
    std::vector<Task::Arg> args;
    std::vector<bool> arg_free;  // the argument's storage died or was overwritten
    std::vector<StorageValue*> arg_storage;  // null for scalars and once free
    std::vector<RedrawRef> arg_redraw;
    std::vector<StorageValue*> written;  // null once dead
    std::vector<OpSite> sites;
    std::vector<CollectiveCall> calls;
    int64_t ops = 0;
    LoopDetector loop;
  };
  // The pending graph `s` is pending in or a parameter of, or null.
  Pending* owner(const StorageValue* s) const;
  Pending& for_issuer(uint64_t issuer);
  void flush(Pending& p, Reason why);
  std::unique_ptr<Task> make_task(Pending& p, Reason why);
  int device_;
  bool capture_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::atomic<int64_t> last_op_ns_{0};
};

// The op count at which a fused graph is cut when no loop is found.
void set_fused_max_ops(int64_t n);
int64_t fused_max_ops();

}  // namespace torchtpu::eager
