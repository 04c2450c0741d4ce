// OpMemo: the graph an op built for one call, handed to the mode again for a
// later call with identical arguments, so the kernel (for a foreach op,
// PyTorch's per-tensor loop and the per-tensor kernels) does not run again:
// a training step calls the same ops over tensors of the same layouts every
// step, and building their graphs was much of its host time. What the mode
// does with the graph (one Strict program, one Fused append, donation,
// buckets) is unchanged, so results are exactly those of building it anew.
//
// The key holds everything a kernel's graph can depend on: the op; per
// tensor its device, dtype, sizes, strides, offset and conjugate/negative
// bits; which tensors share a storage; per storage its size, stored dtype
// and whether it holds a value; the exact value of every other argument;
// the float32 matmul precision and the default dtype. Only calls whose
// tensors are all on one tpu device (a CPU scalar tensor is read on the
// host) and whose other arguments are numbers, lists, strings, dtypes and
// None are keyed. A call is recorded at the second sighting of its
// structure, and only when its kernel handed exactly one graph to the mode
// (holding no collective, whose kernel joins its group after the graph), reached no sync point or host copy, drew no random
// keys, held no device-side check, read and wrote only the call's storages
// and the new tensors it returned, and left its arguments' sizes and
// storages as they were. An op refused many times (a view, which builds no
// graph) is not keyed again. Bounded: the table is emptied at kMaxEntries.
//
// For a foreach op (boxed), a float argument that changes between calls
// (Adam's bias-corrected step sizes) is free once shown to be a runtime
// scalar of the graph: two calls that differ only in it built the same
// graph, whose scalar parameters differ exactly where that argument does,
// holding its values. Later calls then take the graph with their own values
// at those parameters. Values a kernel may treat specially (0, +-1, +-2,
// +-0.5, NaN, Inf) are never taken for a free argument.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "eager/metrics.h"
#include "eager/op_graph.h"

namespace torchtpu::aten {

class OpMemo {
 public:
  static constexpr size_t kMaxEntries = 1024;
  // Refusals after which an op is not keyed again.
  static constexpr int kMaxRefusals = 8;

  // One call's key (all but the values of numbers), the values of its
  // numbers in argument order, and its storages, each once, in argument order.
  struct Call {
    bool ok = false;  // every argument could be keyed
    bool may_free = false;  // numbers may become free (foreach ops)
    int device = -1;
    uint64_t hash = 0;
    std::vector<int64_t> words;
    std::vector<eager::HostScalar> values;
    std::vector<eager::StorageValue*> storages;
    // Typed calls: every tensor argument (in lists too), and the top-level
    // ones with their argument index.
    std::vector<const at::Tensor*> tensors;
    std::vector<std::pair<int, const at::Tensor*>> top;
    bool unkeyable = false;  // an argument of a kind never keyed (the op is refused)
  };
  // How a returned tensor is made again: one of the arguments (`arg`: its
  // index among the call's arguments), undefined, or a new tensor of these
  // sizes, strides and dtype (its storage new storage `fresh`).
  struct Out {
    int arg = -1;
    bool undefined = false;
    int fresh = -1;
    std::vector<int64_t> sizes, strides;
    at::ScalarType dtype = at::kFloat;
  };
  // A tensor a kernel returned, and whether as a reference (to an argument).
  struct Result {
    const at::Tensor* tensor;
    bool ref;
  };
  // What a hit hands back: the graph with the call's storages, the new
  // tensors it writes, and how to make each returned tensor.
  struct Hit {
    eager::OpGraph::Built built;
    std::vector<at::Tensor> fresh;
    std::vector<Out> outs;
    std::vector<int32_t> out_fresh;  // per graph output: the new tensor it writes, or -1
  };

  // Whether memoized graphs are used and recorded (TORCHTPU_OP_MEMO).
  static bool enabled();
  static void set_enabled(bool on);
  // Whether a call of op `c` may be keyed on this thread now (the memo is on,
  // no op is running here, no batch builds, no NaN check, `c` not refused).
  static bool eligible(const eager::OpCounter* c);

  // The key of a boxed op `name`'s `n` arguments on top of `stack`, on `device`.
  static Call key(const char* name, int device, const torch::jit::Stack& stack, size_t n);
  // The key of a typed call: Args::see each argument, then finish().
  class Args {
   public:
    explicit Args(const char* name);
    void see(const at::Tensor& t);
    void see(const std::optional<at::Tensor>& t);
    void see(at::TensorList ts);
    void see(const at::ITensorListRef& ts);
    void see(const c10::List<std::optional<at::Tensor>>& ts);
    void see(const c10::Scalar& s);
    void see(const std::optional<c10::Scalar>& s);
    void see(int64_t v);
    void see(double v);
    void see(bool v);
    void see(const c10::SymInt& v);
    void see(at::IntArrayRef v);
    void see(c10::SymIntArrayRef v);
    void see(at::OptionalIntArrayRef v);
    void see(at::OptionalSymIntArrayRef v);
    void see(at::ArrayRef<double> v);
    void see(const std::optional<at::ArrayRef<double>>& v);
    void see(std::optional<int64_t> v);
    void see(const std::optional<c10::SymInt>& v);
    void see(std::optional<double> v);
    void see(std::optional<bool> v);
    void see(at::ScalarType v);
    void see(std::optional<at::ScalarType> v);
    void see(c10::string_view v);
    void see(std::optional<c10::string_view> v);
    void see(std::optional<at::Layout> v);
    void see(std::optional<at::Device> v);
    void see(std::optional<at::MemoryFormat> v);
    template <size_t N>
    void see(const std::array<bool, N>& v) {
      bools(v.data(), N);
    }
    template <class T>
    void see(const T&) {
      ++pos_;
      call_.ok = false;  // not keyed: a generator, a dimension name, ...
      call_.unkeyable = true;
    }
    Call finish();

   private:
    void word(int64_t w) { call_.words.push_back(w); }
    void tensor(const at::Tensor& t);
    void bools(const bool* v, size_t n);
    Call call_;
    size_t pos_ = 0;  // the argument being seen
    std::vector<std::pair<const eager::StorageValue*, int32_t>> index_;
    std::unique_lock<std::recursive_mutex> lock_;  // storage state is guarded by the device lock
  };

  // The graph recorded for `call`, with the call's storages (and new
  // tensors for the ones it returns), or none; then `*again` tells whether
  // a call of its structure was seen before (only a repeated call is worth
  // recording: a one-shot call pays no graph copy).
  static std::optional<Hit> find(const Call& call, bool* again = nullptr);
  // Keeps what a boxed `call` built (see above).
  static void record(const Call& call, const eager::OpGraph::Built& built);

  // While one lives on this thread, a typed call's kernel runs: it collects
  // what the kernel handed to the mode; done() records it (or counts a
  // refusal of op `c`).
  class Recording {
   public:
    Recording(const eager::OpCounter* c, const Call& call);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
    // The kernel returned `results`; `args`: each argument's address.
    void done(const std::vector<Result>& results, const std::vector<const void*>& args);

   private:
    const eager::OpCounter* c_;
    const Call& call_;
    std::vector<int64_t> meta_;
    eager::OpGraph::Recorder rec_;
  };
  // A typed call on a hit: creates the new tensors, hands the graph to the
  // mode as op `name` would.
  static void run(const char* name, int device, Hit& hit);

  // A double's bits (keys compare numbers exactly: -0.0 and NaN payloads too).
  static int64_t bits(double d) {
    int64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  }

  // Calls answered from the table, and graphs recorded (debug.metrics()).
  static int64_t hits();
  static int64_t records();
  static void reset_counts();
  static void clear();
};

}  // namespace torchtpu::aten
