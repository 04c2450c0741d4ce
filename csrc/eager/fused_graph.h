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
//
// Replay (fused_replay.cpp): every graph cut (but a capture's, or one with
// collectives) is kept as a recording: per op its graph's structural key,
// where each input came from (a scalar, a value pending in this graph, a
// parameter already read, a new parameter) and the values it wrote, then
// the cut graph with its outputs and donations. When a later graph starts
// with the op a recording starts with, each op is checked against the
// recorded one (key, op, inputs' places, output dtypes); while they match
// it takes the recorded values and builds nothing, and at the cut (the same
// op count, the same live outputs and freed parameters) the recorded graph
// runs with this graph's arguments: no merging, no hashing. On the first
// mismatch the recorded prefix becomes this graph's nodes and the op is
// appended as usual, so results never depend on replay.
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
  // The same for an immutable graph (an op memo's) with its structural key.
  void append_shared(const ir::Graph& op, const ir::GraphKey& key, const std::vector<OpGraph::Input>& inputs,
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
  // Where an op's input came from (replay: the same place again).
  enum class From : uint8_t { kScalar, kPending, kParam, kNewParam };
  struct Bind {
    From from;
    int32_t param_node;  // in the op's graph
    ir::Value value;     // in the pending graph
  };
  // One op as appended: its graph's key, the op, its loop fingerprint, and
  // the ends of its nodes, binds and written values.
  struct Step {
    ir::GraphKey key;
    const char* op;
    uint64_t fp;
    int32_t nodes_end, binds_end, outs_end;
  };
  struct Written {
    ir::Value value;
    ir::DType dtype;
  };
  struct Recording {
    std::vector<Step> steps;
    std::vector<Bind> binds;
    std::vector<Written> outs;
    std::shared_ptr<const ir::Graph> graph;  // as cut (outputs, donations)
    ir::GraphKey key;                        // graph_key(*graph, salt)
    std::vector<int32_t> out_at;             // per output: its index in `written`
    std::vector<bool> arg_free;
    // The recording of the graph cut after this one last time (tried first).
    mutable std::weak_ptr<const Recording> next;
  };
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
    // Replay: the recording this graph follows (its first `ops` ops), or
    // the journal of this graph as built (journaled: none was refused).
    std::shared_ptr<const Recording> replay;
    Recording journal;
    bool journaled = true;
    std::vector<std::shared_ptr<const Recording>> recordings;  // most recent first
    std::shared_ptr<const Recording> last;  // of the graph cut last
  };
  static constexpr size_t kMaxRecordings = 8;
  // The graph an op joins; another thread's graph holding its storages is
  // materialized first.
  Pending& join(const std::vector<OpGraph::Input>& inputs, const std::vector<OpGraph::Output>& outputs,
                const OpSite& site);
  void append_op(ir::Graph* owned, const ir::Graph& op, const ir::GraphKey* key,
                 const std::vector<OpGraph::Input>& inputs, const std::vector<OpGraph::Output>& outputs,
                 const OpSite& site);
  // Records the loop detector's step and cuts where it says.
  void after_append(Pending& p, uint64_t fp, bool collectives);
  // fused_replay.cpp: takes the op's place in the recording `p` follows (or
  // one starting with it); false if it does not match.
  bool replay_op(Pending& p, const ir::GraphKey& key, const std::vector<OpGraph::Input>& inputs,
                 const std::vector<OpGraph::Output>& outputs, const OpSite& site);
  static bool matches(const Pending& p, const Recording& r, size_t i, const ir::GraphKey& key,
                      const std::vector<OpGraph::Input>& inputs, const std::vector<OpGraph::Output>& outputs,
                      const OpSite& site);
  // Whether the first n ops of two recordings are the same.
  static bool same_prefix(const Recording& a, const Recording& b, size_t n);
  // The recording p follows, or one with its ops so far, whose cut fits
  // p's now (its live outputs `out_at`, its freed parameters), or null.
  std::shared_ptr<const Recording> fitting(const Pending& p, const std::vector<int32_t>& out_at) const;
  // Gives up the recording: its prefix becomes p's nodes and journal.
  void stop_replay(Pending& p, const OpSite* site, const char* why);
  // The task of a replayed graph at its cut, or null (then stop_replay).
  std::unique_ptr<Task> replay_task(Pending& p, Reason why);
  // Keeps p's journal as a recording of the graph it was cut into.
  void keep_recording(Pending& p, std::vector<int32_t> out_at, const std::shared_ptr<const ir::Graph>& g,
                      Task& task);
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

// Whether graphs are recorded and replayed (TORCHTPU_FUSED_REPLAY).
void set_fused_replay(bool on);
bool fused_replay();

// The op count at which a fused graph is cut when no loop is found.
void set_fused_max_ops(int64_t n);
int64_t fused_max_ops();

}  // namespace torchtpu::eager
