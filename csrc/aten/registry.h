// How a kernel reaches PyTorch's dispatcher. Each family file
// (csrc/aten/kernels_<family>.cpp) binds its kernels in one
// `TPU_KERNELS(m) { ... }` block; registry.cpp registers them in the order of
// its sorted table, which names every bound overload and its family, and
// refuses to start when the two disagree. Every kernel goes through one
// wrapper that counts the call under its overload name
// (debug.metrics()["ops"]), checks that its tensors share one tpu device (a
// CPU 0-d tensor counts as a scalar, as on CUDA), and lets the op memo
// answer a call with identical arguments (op_memo.h; not for kernels that
// copy between devices).
#pragma once

#include <torch/library.h>

#include <atomic>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "aten/op_memo.h"
#include "eager/metrics.h"
#include "eager/trace.h"

namespace torchtpu::aten {

// Which devices a kernel's tensor arguments may be on.
enum class Devices {
  kSame,  // one tpu device; CPU 0-d tensors as scalars
  kAny,   // the kernel decides (copies between devices, CPU index tensors)
};

[[noreturn]] void device_mismatch(const char* op, c10::Device a, c10::Device b);

// The device check of the registration wrapper, over any kernel signature.
class DeviceCheck {
 public:
  explicit DeviceCheck(const char* op) : op_(op) {}
  void see(const at::Tensor& t) {
    if (!t.defined()) return;
    const c10::Device d = t.device();
    if (d.is_privateuseone()) {
      if (!tpu_) tpu_ = d;
      else if (*tpu_ != d) device_mismatch(op_, *tpu_, d);
    } else if (!other_ && !(d.is_cpu() && t.dim() == 0)) {
      other_ = d;
    }
  }
  void see(const std::optional<at::Tensor>& t) {
    if (t) see(*t);
  }
  void see(at::TensorList ts) {
    for (const at::Tensor& t : ts) see(t);
  }
  void see(const at::ITensorListRef& ts) {
    for (const at::Tensor& t : ts) see(t);
  }
  void see(const c10::List<std::optional<at::Tensor>>& ts) {
    for (const std::optional<at::Tensor>& t : ts) see(t);
  }
  template <class T>
  void see(const T&) {}
  void done() const {
    if (tpu_ && other_) device_mismatch(op_, *tpu_, *other_);
  }

 private:
  const char* op_;
  std::optional<c10::Device> tpu_, other_;
};

// PyTorch's rule for a tensor written while `input` is read (TensorIterator's
// assert_no_partial_overlap): the two may be the same elements, or apart,
// but may not partly overlap (raises the CPU's error).
void check_no_partial_overlap(const at::Tensor& written, const at::Tensor& input);

// Whether distinct elements of `t` share memory with no stride 0 (an unfold
// or as_strided view). PyTorch's CPU applies an in-place op to such a tensor
// once per element, in order, so a location referred to twice is updated
// twice; a device program writes each location once. (Stride 0 is PyTorch's
// assert_no_internal_overlap, which raises.)
bool overlaps_itself(const at::Tensor& t);
// Runs the in-place op `name` ("aten::add_.Tensor") on the CPU over a copy of
// the memory its first argument covers (and the arguments of its dtype that
// meet it) and writes that memory back: the CPU's values where the op reads
// memory it writes. Counted and warned as a fallback.
void write_on_host(const char* name, torch::jit::Stack* stack);
// How PyTorch's CPU treats an in-place op (registered with impl) whose
// written tensor meets memory another of its arguments reads, or overlaps
// itself. kWhole: neither matters (set_, resize_, fill_, zero_, the random
// fills); kElementwise: each element reads only its own place and numbers
// read first, so the device's values are the CPU's, and only a self-overlap
// goes to the host; kNoOverlap: the CPU refuses any overlap with an input
// (assert_no_overlap: index_add_, index_copy_, index_reduce_, put_,
// index_put_); kSequential: the CPU reads while it writes (addmv_,
// baddbmm_, addmm_, masked_scatter_, ...), so any overlap goes to the host;
// kIterator: TensorIterator's rules (a dense input partly overlapping the
// written tensor raises; other overlaps go to the host). `otherwise` is the
// rule of an op the table does not name.
enum class InplaceRule { kWhole, kElementwise, kNoOverlap, kSequential, kIterator };
InplaceRule inplace_rule(const char* name, InplaceRule otherwise);
// Whether `t` reads memory that `written`'s elements span (or is it).
bool meets(const at::Tensor& written, const at::Tensor& t);
// Whether the two are views of the same elements (offset, sizes, strides, dtype).
bool same_elements(const at::Tensor& a, const at::Tensor& b);
[[noreturn]] void overlap_refused();

// TORCHTPU_CHECK_NAN: each floating or complex output of an op (a tpu
// tensor, outside a compiled function's capture) is checked for NaN and Inf
// as the op returns, raising an error that names the op, the output and the
// user's line. Each check waits for the op (meant for Debug Eager).
extern std::atomic<bool> nan_check;
void check_finite(const char* op, const at::Tensor& t, int index);
inline void check_outputs(const char* op, const at::Tensor& t) { check_finite(op, t, 0); }
inline void check_outputs(const char* op, const std::vector<at::Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) check_finite(op, ts[i], static_cast<int>(i));
}
template <class T>
void check_outputs_at(const char* op, const T& t, int index) {
  if constexpr (std::is_convertible_v<const T&, const at::Tensor&>) check_finite(op, t, index);
}
template <class... T>
void check_outputs(const char* op, const std::tuple<T...>& ts) {
  int i = 0;
  std::apply([&](const auto&... t) { (check_outputs_at(op, t, i++), ...); }, ts);
}
template <class T>
void check_outputs(const char*, const T&) {}

namespace registry_detail {

// How the op memo (op_memo.h) sees a kernel's result: the tensors it
// returns, and the same result made again on a hit. Results of other kinds
// (numbers, lists of references) are not memoized.
template <class R>
struct MemoResult {
  static constexpr bool kOk = false;
};
template <>
struct MemoResult<void> {
  static constexpr bool kOk = true;
};
inline const at::Tensor& memo_tensor(const OpMemo::Hit& h, const std::vector<const void*>& args, size_t& i) {
  static const at::Tensor undefined;
  const OpMemo::Out& o = h.outs.at(i++);
  if (o.arg >= 0) return *static_cast<const at::Tensor*>(args[o.arg]);
  return o.undefined ? undefined : h.fresh.at(o.fresh);
}
template <>
struct MemoResult<at::Tensor> {
  static constexpr bool kOk = true;
  static void tensors(const at::Tensor& r, std::vector<OpMemo::Result>& out) { out.push_back({&r, false}); }
  static at::Tensor make(const OpMemo::Hit& h, const std::vector<const void*>& args, size_t& i) {
    return memo_tensor(h, args, i);
  }
};
template <>
struct MemoResult<at::Tensor&> {
  static constexpr bool kOk = true;
  // A reference the kernel returned: recorded only as one to an argument.
  static void tensors(const at::Tensor& r, std::vector<OpMemo::Result>& out) { out.push_back({&r, true}); }
  static at::Tensor& make(const OpMemo::Hit& h, const std::vector<const void*>& args, size_t& i) {
    return const_cast<at::Tensor&>(memo_tensor(h, args, i));  // recorded only as a reference to an argument
  }
};
template <>
struct MemoResult<std::vector<at::Tensor>> {
  static constexpr bool kOk = true;
  static void tensors(const std::vector<at::Tensor>& r, std::vector<OpMemo::Result>& out) {
    for (const at::Tensor& t : r) out.push_back({&t, false});
  }
  static std::vector<at::Tensor> make(const OpMemo::Hit& h, const std::vector<const void*>& args, size_t& i) {
    std::vector<at::Tensor> r;
    while (i < h.outs.size()) r.push_back(memo_tensor(h, args, i));
    return r;
  }
};
template <class... T>
struct MemoResult<std::tuple<T...>> {
  static constexpr bool kOk = (MemoResult<T>::kOk && ...) && (std::is_same_v<std::decay_t<T>, at::Tensor> && ...);
  static void tensors(const std::tuple<T...>& r, std::vector<OpMemo::Result>& out) {
    std::apply([&](const auto&... t) { (MemoResult<T>::tensors(t, out), ...); }, r);
  }
  static std::tuple<T...> make(const OpMemo::Hit& h, const std::vector<const void*>& args, size_t& i) {
    return std::tuple<T...>{MemoResult<T>::make(h, args, i)...};  // braced: in order
  }
};

// Runs `call` (the kernel on arguments `a`), through the op memo when the
// call can be keyed: a hit hands the recorded graph to the mode and makes
// the result again; a miss runs the kernel and records what it built.
template <class R, class Call, class... A>
R memoized(eager::OpCounter* c, Call&& call, A&... a) {
  if constexpr (!MemoResult<R>::kOk) {
    return call();
  } else {
    if (!OpMemo::eligible(c)) return call();
    OpMemo::Args keyer(c->name());
    (keyer.see(a), ...);
    const OpMemo::Call k = keyer.finish();
    if (!k.ok) {
      if (k.unkeyable) c->memo_refusals.fetch_add(1, std::memory_order_relaxed);
      return call();
    }
    const std::vector<const void*> args{static_cast<const void*>(&a)...};
    bool again = false;
    if (std::optional<OpMemo::Hit> hit = OpMemo::find(k, &again)) {
      OpMemo::run(c->name(), k.device, *hit);
      if constexpr (!std::is_void_v<R>) {
        size_t i = 0;
        return MemoResult<R>::make(*hit, args, i);
      } else {
        return;
      }
    }
    if (!again) return call();  // recorded when seen again
    OpMemo::Recording rec(c, k);
    if constexpr (std::is_void_v<R>) {
      call();
      rec.done({}, args);
    } else {
      R r = call();
      std::vector<OpMemo::Result> out;
      MemoResult<R>::tensors(r, out);
      rec.done(out, args);
      return r;
    }
  }
}

// Calls the kernel, then the NaN check on what it returns.
template <class R, class Call>
R checked(eager::OpCounter* c, Call&& call) {
  if constexpr (std::is_void_v<R>) {
    call();
  } else {
    R r = call();
    if (nan_check.load(std::memory_order_relaxed)) check_outputs(c->name(), r);
    return r;
  }
}

template <class... T>
struct List {};
template <class Acc, class... T>
struct DropLast;
template <class... Acc, class T>
struct DropLast<List<Acc...>, T> {
  using type = List<Acc...>;
};
template <class... Acc, class T, class U, class... Rest>
struct DropLast<List<Acc...>, T, U, Rest...> {
  using type = typename DropLast<List<Acc..., T>, U, Rest...>::type;
};

template <class... A>
inline void check(eager::OpCounter* c, Devices devices, const A&... a) {
  c->inc();
  if (devices == Devices::kAny) return;
  DeviceCheck dc(c->name());
  (dc.see(a), ...);
  dc.done();
}

// The kernel as registered: F behind the counter and the device check.
template <class F, class Sig = typename F::FuncType>
struct Wrap;
template <class... A>
struct FirstArg {
  using type = void;
};
template <class T, class... A>
struct FirstArg<T, A...> {
  using type = T;
};
template <class T, class... A>
T& first_arg(T& t, A&...) {
  return t;
}
// Whether any tensor among the arguments after the first meets `written`.
struct MeetScan {
  const at::Tensor& written;
  bool same_ok = false;  // a tensor of exactly the written elements does not count
  bool met = false;
  void see(const at::Tensor& t) {
    met = met || (meets(written, t) && !(same_ok && same_elements(written, t)));
  }
  void see(const std::optional<at::Tensor>& t) {
    if (t) see(*t);
  }
  void see(at::TensorList ts) {
    for (const at::Tensor& t : ts) see(t);
  }
  void see(const c10::List<std::optional<at::Tensor>>& ts) {
    for (const std::optional<at::Tensor>& t : ts) see(t);
  }
  template <class T>
  void see(const T&) {}
};
template <class T, class... Rest>
bool rest_meets(const T& first, const Rest&... rest) {
  MeetScan scan{first};
  (scan.see(rest), ...);
  return scan.met;
}
template <class F, class R, class... A>
struct Wrap<F, R(A...)> {
  // An in-place op: its first argument is written and returned.
  static constexpr bool kInplace =
      std::is_same_v<R, at::Tensor&> && std::is_same_v<typename FirstArg<A...>::type, at::Tensor&>;
  static torch::CppFunction make(eager::OpCounter* c, Devices devices) {
    const InplaceRule rule = kInplace ? inplace_rule(c->name(), InplaceRule::kSequential) : InplaceRule::kWhole;
    return torch::CppFunction([c, devices, rule](A... a) -> R {
      eager::Trace::Span span(c->name(), "op");  // the op on a timeline (eager/trace.h)
      check(c, devices, a...);
      if constexpr (kInplace) {
        if (rule != InplaceRule::kWhole) {
          const bool met = rule != InplaceRule::kElementwise && rest_meets(a...);
          if (met && rule == InplaceRule::kNoOverlap) overlap_refused();
          if (met || overlaps_itself(first_arg(a...))) {
            torch::jit::Stack stack;
            torch::jit::push(stack, a...);
            write_on_host(c->name(), &stack);
            return first_arg(a...);
          }
        }
      }
      return checked<R>(c, [&]() -> R {
        auto call = [&]() -> R { return (*F::func_ptr())(std::forward<A>(a)...); };
        if (devices == Devices::kAny) return call();  // copies between devices
        return memoized<R>(c, call, a...);
      });
    });
  }
};

// An out= kernel as registered: Wrap's checks, then no input may partly
// overlap `out` (its last argument).
struct OverlapCheck {
  const at::Tensor& out;
  void see(const at::Tensor& t) const {
    if (&t != &out) check_no_partial_overlap(out, t);
  }
  void see(const std::optional<at::Tensor>& t) const {
    if (t) see(*t);
  }
  void see(at::TensorList ts) const {
    for (const at::Tensor& t : ts) see(t);
  }
  void see(const at::ITensorListRef& ts) const {
    for (const at::Tensor& t : ts) see(t);
  }
  template <class T>
  void see(const T&) const {}
};
template <class F, class Sig = typename F::FuncType>
struct WrapOut;
template <class F, class R, class... A>
struct WrapOut<F, R(A...)> {
  static torch::CppFunction make(eager::OpCounter* c) {
    return torch::CppFunction([c](A... a) -> R {
      eager::Trace::Span span(c->name(), "op");  // the op on a timeline (eager/trace.h)
      check(c, Devices::kSame, a...);
      const OverlapCheck oc{std::get<sizeof...(A) - 1>(std::forward_as_tuple(a...))};
      (oc.see(a), ...);
      return checked<R>(c, [&]() -> R {
        return memoized<R>(c, [&]() -> R { return (*F::func_ptr())(std::forward<A>(a)...); }, a...);
      });
    });
  }
};

// The functional form of an out= kernel F: F with an undefined `out` makes a
// new tensor and assigns it to `out` (Kernel::result, finish).
template <class F, class Params>
struct Functional;
template <class F, class... B>
struct Functional<F, List<B...>> {
  static torch::CppFunction make(eager::OpCounter* c) {
    return torch::CppFunction([c](B... b) -> at::Tensor {
      eager::Trace::Span span(c->name(), "op");  // the op on a timeline (eager/trace.h)
      check(c, Devices::kSame, b...);
      at::Tensor out = memoized<at::Tensor>(c, [&]() -> at::Tensor {
        at::Tensor made;
        (*F::func_ptr())(std::forward<B>(b)..., made);
        return made;
      }, b...);
      TORCH_INTERNAL_ASSERT(out.defined(), c->name(), ": the out= kernel made no tensor");
      if (nan_check.load(std::memory_order_relaxed)) check_finite(c->name(), out, 0);
      return out;
    });
  }
};

// The in-place form of an out= kernel F: F with out = self. An out= tensor
// that is also an input is never resized (Kernel::into_resized), so shape
// and dtype rules are those of PyTorch's in-place ops, and so are its
// overlap rules: no input may partly overlap self, and a self whose elements
// share memory is written on the host (write_on_host).
template <class F, class Params>
struct Inplace;
template <class F, class... B>
struct Inplace<F, List<B...>> {
  static torch::CppFunction make(eager::OpCounter* c) {
    const InplaceRule rule = inplace_rule(c->name(), InplaceRule::kIterator);
    return torch::CppFunction([c, rule](at::Tensor& self, B... b) -> at::Tensor& {
      eager::Trace::Span span(c->name(), "op");  // the op on a timeline (eager/trace.h)
      check(c, Devices::kSame, self, b...);
      // kIterator: a dense input partly overlapping self raises; other
      // overlaps (not dense), which PyTorch's CPU kernels compute reading as
      // they write, go to the host. kSequential: any overlap does.
      MeetScan met{self, /*same_ok=*/rule == InplaceRule::kIterator};
      if (rule == InplaceRule::kIterator) {
        const OverlapCheck oc{self};
        (oc.see(b), ...);
      }
      (met.see(b), ...);
      if (met.met || overlaps_itself(self)) {
        torch::jit::Stack stack;
        torch::jit::push(stack, self, b...);
        write_on_host(c->name(), &stack);
        return self;
      }
      memoized<void>(c, [&] { (*F::func_ptr())(self, std::forward<B>(b)..., self); }, self, b...);
      if (nan_check.load(std::memory_order_relaxed)) check_finite(c->name(), self, 0);
      return self;
    });
  }
};

// A boxed kernel behind the call counter.
struct CountedBoxed final : c10::OperatorKernel {
  // The operator, its counted name ("aten::_foreach_add_.Scalar") and its stack.
  using Fn = void (*)(const c10::OperatorHandle&, const char* name, torch::jit::Stack*);
  CountedBoxed(eager::OpCounter* c, Fn f) : counter(c), fn(f) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    eager::Trace::Span span(counter->name(), "op");
    counter->inc();
    fn(op, counter->name(), stack);
  }
  eager::OpCounter* counter;
  Fn fn;
};

template <class F, class Sig = typename F::FuncType>
struct OutForms;
template <class F, class... A>
struct OutForms<F, at::Tensor&(A...)> {
  using functional = Functional<F, typename DropLast<List<>, A...>::type>;
};
template <class F, class Sig = typename F::FuncType>
struct InplaceForm;
template <class F, class... A>
struct InplaceForm<F, at::Tensor&(const at::Tensor&, A...)> {
  using type = Inplace<F, typename DropLast<List<>, A...>::type>;
};

}  // namespace registry_detail

// What a family's TPU_KERNELS block registers into.
class Registrar {
 public:
  explicit Registrar(std::string family) : family_(std::move(family)) {}
  // Binds kernel `f` (TORCH_FN(...)) to the aten overload `name` ("add.Tensor").
  template <class F>
  void impl(const char* name, F, Devices devices = Devices::kSame) {
    add(name, registry_detail::Wrap<F>::make(counter(name), devices));
  }
  // Binds the out= kernel `f` to `name` and derives from it the functional
  // overload `functional` and (second form) the in-place overload `inplace`.
  template <class F>
  void out(const char* name, F, const char* functional) {
    add(name, registry_detail::WrapOut<F>::make(counter(name)));
    add(functional, registry_detail::OutForms<F>::functional::make(counter(functional)));
  }
  template <class F>
  void out(const char* name, F f, const char* functional, const char* inplace) {
    out(name, f, functional);
    add(inplace, registry_detail::InplaceForm<F>::type::make(counter(inplace)));
  }
  // Binds a boxed kernel (it checks devices itself) to `name`.
  using BoxedFn = registry_detail::CountedBoxed::Fn;
  void boxed(const char* name, BoxedFn fn);

 private:
  eager::OpCounter* counter(const char* name);
  void add(const char* name, torch::CppFunction f);
  std::string family_;
};

using FamilyFn = void (*)(Registrar&);
bool add_family(const char* file, FamilyFn fn);
// Registers every family's kernels with the dispatcher, in table order
// (once; at import).
void register_kernels();
// The sorted table: (overload, family) for every bound kernel.
std::vector<std::pair<std::string, std::string>> kernel_table();

}  // namespace torchtpu::aten

#define TPU_KERNELS_CAT2(a, b) a##b
#define TPU_KERNELS_CAT(a, b) TPU_KERNELS_CAT2(a, b)
// A family file's one registration block: TPU_KERNELS(m) { m.impl(...); }
#define TPU_KERNELS(m)                                                                          \
  static void TPU_KERNELS_CAT(tpu_kernels_, __LINE__)(::torchtpu::aten::Registrar&);             \
  static const bool TPU_KERNELS_CAT(tpu_kernels_added_, __LINE__) =                             \
      ::torchtpu::aten::add_family(__FILE__, &TPU_KERNELS_CAT(tpu_kernels_, __LINE__));          \
  static void TPU_KERNELS_CAT(tpu_kernels_, __LINE__)(::torchtpu::aten::Registrar & m)
