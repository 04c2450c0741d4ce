// Plumbing shared by the ATen kernels: the ScalarType <-> ir::DType map, the
// StorageValue behind a device tensor, and Kernel, which wraps one OpGraph
// with tensor-level reads and writes.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>

#include "eager/metrics.h"
#include "eager/op_graph.h"

namespace torchtpu::aten {

using ir::DType;
using ir::Value;
using ops::Builder;

DType to_ir(at::ScalarType t);  // throws c10::TypeError for unsupported dtypes
at::ScalarType to_aten(DType t);
eager::StorageValue* storage_value(const at::Tensor& t);
ops::ViewMeta view_meta(const at::Tensor& t);
ir::Dims to_dims(at::IntArrayRef a);
c10::Allocator* device_allocator();
// A new contiguous device tensor (storage not yet written).
at::Tensor empty_device(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device);
// The strides PyTorch's TensorIterator gives a new output of `shape` over
// `inputs` (its fast setup, else its dimension reordering: the first input
// with an opinion decides); empty for row-major.
std::vector<int64_t> iterator_strides(at::IntArrayRef shape, c10::ArrayRef<const at::Tensor*> inputs);

// Raises PyTorch's device-mismatch error unless every defined tensor is on
// `device` or is a CPU 0-d tensor (a scalar, as CUDA allows).
void check_same_device(const char* op, c10::Device device, std::initializer_list<const at::Tensor*> ts);

// The precision of float32 matmuls and convolutions: torchtpu.precision(...)'s
// process-wide override while one is set (-1: none), else
// torch.set_float32_matmul_precision ("highest", "high", "medium": HIGHEST,
// HIGH, DEFAULT).
ops::Precision matmul_precision();
int set_precision_override(int precision);  // returns the previous one

class KernelBatch;

// One op's graph at the tensor level (inside a KernelBatch of its device,
// the batch's graph).
class Kernel {
 public:
  Kernel(const char* op, c10::Device device);
  Kernel(const char* op, const at::Tensor& any_device_tensor) : Kernel(op, any_device_tensor.device()) {}
  Builder& b() { return og_->b(); }
  const char* op() const { return op_; }
  c10::Device device() const { return device_; }

  // The tensor's value, converted to `as` (CPU 0-d tensors become scalars).
  Value in(const at::Tensor& t, at::ScalarType as);
  // Raises a TypeError unless this kernel is right for complex operands.
  void check_complex(at::ScalarType t) const;
  // Raises PyTorch's NotImplementedError unless this kernel is defined for
  // float8 operands.
  void check_float8(at::ScalarType t) const;
  Value in(const at::Tensor& t) { return in(t, t.scalar_type()); }
  Value scalar(const c10::Scalar& s, at::ScalarType as);
  // Scalars drawn from `source` now and again on every run of a compiled
  // program that holds the op (random keys).
  std::vector<Value> drawn(const std::vector<at::ScalarType>& as, std::shared_ptr<eager::Redraw> source);
  // A new device tensor holding `v` (converted to `dtype`): row-major, or,
  // for an elementwise op, in the dimension order TensorIterator gives it.
  at::Tensor out(Value v, at::ScalarType dtype);
  // Marks the op elementwise (PyTorch runs it on a TensorIterator): a new
  // output of the inputs' broadcast shape takes their dimension order, so a
  // transposed or channels-last input gives a transposed or channels-last
  // result, as on the CPU and CUDA.
  // The dimension order comes from `operands`, PyTorch's operands in its
  // order (the op's arguments: they outlive the kernel), when given, else
  // from the tensors in() reads after this call (C++ leaves the order of a
  // call's arguments open: give them for ops of several tensors). Without
  // either, results are row-major.
  void elementwise(bool on = true) { elementwise_ = on; }
  void elementwise(std::initializer_list<const at::Tensor*> operands);
  // While on, new matrix results (2 dims or more), and out= tensors this op
  // resizes, are batched column-major, as LAPACK-backed ops return them on
  // the CPU and CUDA.
  void column_major(bool on) { column_major_ = on; }
  // Writes `v` into `dst` (any view), converting to dst's dtype.
  void into(const at::Tensor& dst, Value v);
  // For out= variants: resizes `out` to v's shape (if needed) and writes.
  void into_resized(const at::Tensor& out, Value v);
  // `v` into `out` (resized) when given, else into a new tensor of `dtype`.
  at::Tensor result(Value v, at::ScalarType dtype, const at::Tensor* out);
  // A device-side check, as CUDA's device asserts but raised as a Python
  // error: when any element of the bool value `bad` is true, `what` is
  // raised as `kind`, naming the op and the user's line: at once in Debug
  // Eager, else at the issuing thread's next sync point (.item(), .cpu(),
  // print, synchronize()). The flag is computed in the op's own graph.
  enum class CheckKind { kIndex, kRuntime };
  void check(Value bad, CheckKind kind, std::string what);
  // Hands the graph to the mode; in Fused Eager inside backward(), also
  // makes the end of backward a sync point. Inside a batch, leaves the
  // graph (and the checks) to the batch's run().
  void run();

 private:
  struct Check {
    at::Tensor flag;
    CheckKind kind;
    std::string what;
  };
  std::vector<Check> checks_;
  std::vector<eager::StorageValue*> read_;  // storages in() read
  c10::SmallVector<at::Tensor, 2> inputs_;  // device tensors in() read once elementwise() without operands
  c10::SmallVector<const at::Tensor*, 4> operands_;  // elementwise({...})'s device tensors
  bool elementwise_ = false;
  bool column_major_ = false;
  static c10::Device check_device(const char* op, c10::Device device);
  const char* op_;
  c10::Device device_;
  KernelBatch* batch_;
  std::optional<eager::OpGraph> own_;  // unless in a batch
  eager::OpGraph* og_;
};


// For out= kernels over an implementation that takes `out` as an optional
// pointer: the out tensor when the caller gave one, else nullptr (a new
// tensor; the functional form registry.h derives passes an undefined out),
// and the result handed back through an undefined out.
inline const at::Tensor* given(const at::Tensor& out) { return out.defined() ? &out : nullptr; }
inline at::Tensor& handed(at::Tensor& out, const at::Tensor& result) {
  if (!out.defined()) out = result;
  return out;
}

// Checks (Kernel::check) that `index` (read as `idx`, int64) lies in
// [-size, size), or [0, size) when negatives are refused, naming `what`.
void check_index(Kernel& k, Value idx, int64_t size, bool allow_negative, Kernel::CheckKind kind,
                 const std::string& what);
// The device generator's two 32-bit keys for one random op (`g`, else the
// default generator of t's device), as runtime scalars of `k`; advances it.
std::pair<Value, Value> random_keys(Kernel& k, const std::optional<at::Generator>& g, const at::Tensor& t);
// Sync points: raises the first failed device-side check this thread
// issued (and drops the rest); no-op when none is pending.
void raise_failed_checks();

// A device-side check whose flag the device has not been asked for yet.
struct CheckRecord {
  at::Tensor flag;  // 0-d bool on the device
  Kernel::CheckKind kind;
  std::string what;
  eager::OpSite site;
};

// One op made of other ops' kernels: a foreach op, which PyTorch runs as one
// op per tensor of its lists. While a batch lives on this thread, the
// kernels of its device build into its one graph, and run() hands that
// graph to the mode as one op (one program in Strict Eager, one append in
// Fused Eager). Nothing is written before run(): when a kernel raises, or
// reaches a sync point (eager::BatchInterrupted), every tensor keeps its
// value. Batches do not nest: while one builds (building()), a foreach op
// runs its kernels into it.
class KernelBatch {
 public:
  KernelBatch(const char* op, c10::Device device);
  ~KernelBatch();
  KernelBatch(const KernelBatch&) = delete;
  KernelBatch& operator=(const KernelBatch&) = delete;
  void run();
  // What the batch built, unless it holds device-side checks (an op memo
  // keeps it for later calls: op_memo.h).
  std::optional<eager::OpGraph::Built> built() const;
  // The batch of `device` building on this thread, or null.
  static KernelBatch* active(c10::Device device);
  // Whether a batch (of any device) builds on this thread.
  static bool building();

 private:
  friend class Kernel;
  c10::Device device_;
  eager::OpGraph og_;
  std::optional<eager::OpGraph::Batching> batching_;
  std::vector<CheckRecord> checks_;
};

// Hands `built` (a graph an earlier call built, its storages this call's) to
// the mode as the op that built it (else `op`) on `device` would, outside any batch.
void run_built(const char* op, c10::Device device, eager::OpGraph::Built built);

// Queues checks as an op does: for the next sync point of this thread (or
// of any thread, inside a backward pass); Debug Eager raises at once when
// `raise_in_debug`.
void queue_checks(std::vector<CheckRecord> checks, bool raise_in_debug);
// Takes the queued checks whose flags `pred` selects (a compiled program
// computes them).
std::vector<CheckRecord> take_checks(const std::function<bool(const at::Tensor&)>& pred);

// Runs the kernel body, turning lowering errors into Python-visible errors
// that name the op.
[[noreturn]] void rethrow_lowering(const char* op, const std::exception& e);
// Whether kernel `op` ("aten::mul.out") is right for complex operands
// (kernels_complex.cpp keeps the list); others refuse them.
bool complex_supported(const char* op);
// sgn of a complex value: z / |z|, 0 at 0.
Value complex_sgn(Builder& b, Value z);
// An error of queued device work as a Python error (torch.OutOfMemoryError
// for out of memory, else RuntimeError).
[[noreturn]] void rethrow_device_error(const eager::DeviceError& e);

}  // namespace torchtpu::aten
