// OpGraph: the graph one ATen op builds. Kernels read storages (as views),
// take scalar arguments, build nodes with the Builder, and write storages;
// run() hands the graph to the mode, which materializes it (compile on a
// cache miss, execute, swap the written storages' buffers).
#pragma once

#include <utility>
#include <vector>

#include "eager/runtime.h"
#include "ops/builder.h"
#include "ops/views.h"

namespace torchtpu::eager {

class OpGraph {
 public:
  explicit OpGraph(int device);
  ops::Builder& b() { return b_; }
  int device() const { return device_; }

  // The view `v` of storage `s`, read as `dtype`.
  ir::Value read(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v);
  // The whole flat value of `s` as `dtype` (zeros if never written).
  ir::Value read_flat(StorageValue* s, ir::DType dtype);
  // A runtime scalar argument (a new value does not recompile).
  ir::Value scalar(ir::DType dtype, double value);
  // Replaces the view `v` of `s` with `update` (shaped like the view).
  void write(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v, ir::Value update);

  // Materializes according to the runtime's mode.
  void run();

 private:
  struct Input {
    StorageValue* storage;  // null for scalars
    pjrt::BufferPtr buffer;
    ir::Value flat;
  };
  struct Output {
    StorageValue* storage;
    ir::DType dtype;
    ir::Value flat;
  };
  ir::Value param_for(StorageValue* s, ir::DType dtype);
  ir::Value reinterpret(ir::Value v, ir::DType to);

  int device_;
  ir::Graph g_;
  ops::Builder b_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
};

}  // namespace torchtpu::eager
