// OpGraph: the graph one ATen op builds. Kernels read storages (as views),
// take scalar arguments, build nodes with the Builder, and write storages;
// run() hands the graph to the mode (DESIGN decision 1): Debug and Strict
// queue it as one program (Debug waits for it), Fused appends it to the
// device's pending graph. Holds the device lock from construction to
// destruction (or until run() raises). Nothing executes inside a kernel.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "eager/runtime.h"
#include "ir/graph_key.h"
#include "ops/builder.h"
#include "ops/views.h"

namespace torchtpu::eager {

// Scalar arguments that a compiled program draws again on every run (the
// keys a random op takes from its generator): draw() advances the source
// and returns one value per argument it feeds; an argument names its index.
struct Redraw {
  std::function<std::vector<HostScalar>()> draw;
};
struct RedrawRef {
  std::shared_ptr<Redraw> source;
  int index = 0;
};

// Raised at a sync point or a host-to-device copy reached while a batch of
// ops builds one graph on this thread (OpGraph::Batching): the batch's
// writes are in no storage yet, so it is abandoned (its ops may then run
// one by one).
struct BatchInterrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class OpGraph {
 public:
  // While one lives on this thread, check_not_batching raises.
  class Batching {
   public:
    Batching();
    ~Batching();
    Batching(const Batching&) = delete;
    Batching& operator=(const Batching&) = delete;
  };
  // Sync points and uploads call it: raises BatchInterrupted naming `what`
  // while a batch builds on this thread.
  static void check_not_batching(const char* what);

  OpGraph(int device, const char* op);
  ops::Builder& b() { return b_; }
  int device() const { return device_; }
  // The op and the user's source position it was issued from.
  const OpSite& site() const { return outer_ ? *outer_ : site_; }

  // The view `v` of storage `s`, read as `dtype`.
  ir::Value read(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v);
  // The whole flat value of `s` as `dtype` (zeros if never written).
  ir::Value read_flat(StorageValue* s, ir::DType dtype);
  // A runtime scalar argument (a new value does not recompile).
  ir::Value scalar(ir::DType dtype, HostScalar value);
  // Scalar arguments drawn from `source` now, and again on every run of a
  // compiled program holding them.
  std::vector<ir::Value> drawn_scalars(const std::vector<ir::DType>& dtypes, std::shared_ptr<Redraw> source);
  // Replaces the view `v` of `s` with `update` (shaped like the view).
  void write(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v, ir::Value update);

  // Materializes according to the runtime's mode. A DeviceError (Debug
  // Eager) is raised described, after the device lock is released.
  void run();
  // Whether the graph reads storage `s` (as a parameter).
  bool reads(const StorageValue* s) const;

  // What the graph reads: one parameter per storage (its whole flat value as
  // stored) or per scalar, in parameter order.
  struct Input {
    StorageValue* storage;   // null for scalars
    pjrt::BufferPtr scalar;  // scalars only
    ir::Value param;
    RedrawRef redraw;        // drawn scalars only
    HostScalar host{};       // scalars only: the value `scalar` holds
  };
  // What it writes: each storage's new flat value.
  struct Output {
    StorageValue* storage;
    ir::DType dtype;
    ir::Value flat;
  };

  // What the op built so far: its graph, reads and writes (an op memo keeps
  // them for later calls of identical arguments: aten/op_memo.h). A graph
  // an op memo hands out again is `shared` (immutable, with its structural
  // key) and `graph` is empty: Fused Eager appends it without a copy.
  struct Built {
    ir::Graph graph;
    std::vector<Input> inputs;
    std::vector<Output> outputs;
    const char* op = nullptr;  // the op that built it (its name, as sites hold it)
    std::shared_ptr<const ir::Graph> shared;
    ir::GraphKey key{};  // shared graphs only: ir::graph_key(*shared, {})
  };
  // A copy of it (its graph's outputs those the op writes).
  Built built() const;
  // While one lives on this thread, each op (inner ones too) copies what it
  // built into `runs` as it hands it to the mode, and a sync point or
  // a host-to-device copy marks it tainted (an op memo records what one call
  // of an op built: aten/op_memo.h). Recorders nest.
  class Recorder {
   public:
    Recorder();
    ~Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;
    std::vector<Built> runs;
    bool tainted = false;

   private:
    Recorder* prev_;
  };
  // Takes `b` (its storages those of this call) as everything the op built.
  void adopt(Built b);

 private:
  ir::Value param_for(StorageValue* s, ir::DType dtype);
  // Copies an adopted shared graph into g_ (for a mode that takes it whole).
  void own_graph();
  ir::Value reinterpret(ir::Value v, ir::DType to);
  void queue();

  // First: the fork, shutdown and queue-room checks, before any lock.
  // The site is captured before the device lock is taken (capturing takes
  // the GIL; a thread holding the GIL may wait for the device lock); an op
  // built inside another takes the outer op's site.
  Runtime::Entry entry_;
  const OpSite* outer_;
  OpSite site_;
  std::unique_lock<std::recursive_mutex> lock_;
  CurrentOpScope scope_;
  int device_;
  ir::Graph g_;
  std::shared_ptr<const ir::Graph> shared_;  // adopted, not yet copied into g_
  ir::GraphKey key_{};
  ops::Builder b_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
};

}  // namespace torchtpu::eager
