#include "distributed/local_group.h"

#include <Python.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "aten/tensor_ir.h"
#include "distributed/backend.h"
#include "eager/capture.h"
#include "eager/executor.h"
#include "eager/fused_graph.h"
#include "eager/runtime.h"
#include "ir/printer.h"

namespace torchtpu::distributed {
namespace {

using c10d::ReduceOp;

std::mutex programs_mu;
std::vector<std::string>& texts() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

ops::Reduction reduction_of(const ReduceOp& op) {
  switch (op.op_) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM: return ops::Reduction::kSum;
    case ReduceOp::PRODUCT: return ops::Reduction::kProduct;
    case ReduceOp::MIN: return ops::Reduction::kMin;
    case ReduceOp::MAX: return ops::Reduction::kMax;
    default:
      TORCH_CHECK(false, "tpu_dist: reduction ", static_cast<int>(op.op_),
                  " (bitwise) is not supported between thread ranks; use sum, avg, product, min or max");
  }
}

// `t` scaled for a pre-multiplied sum, else `t` itself.
at::Tensor premultiplied(const at::Tensor& t, const ReduceOp& op) {
  if (op.op_ != ReduceOp::PREMUL_SUM) return t;
  auto* f = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(f, "tpu_dist: PREMUL_SUM without a factor");
  return f->tensor_factor.defined() ? t * f->tensor_factor.to(t.device()) : t * f->double_factor;
}

// The result of an average: the sum divided by the group's size.
void finish_average(const at::Tensor& t, const ReduceOp& op, int size) {
  if (op.op_ != ReduceOp::AVG) return;
  if (at::isIntegralType(t.scalar_type(), /*includeBool=*/true)) t.div_(size, "trunc");
  else t.div_(size);
}

std::string describe(const char* op, const at::Tensor& t, const std::string& extra = "") {
  std::ostringstream s;
  s << op;
  if (!extra.empty()) s << "(" << extra << ")";
  s << " " << c10::getDtypeNames(t.scalar_type()).first << t.sizes();
  return s.str();
}

// `t`'s elements in row-major order as a buffer of its device (a fresh copy:
// the program owns it). Zeros when the value was never written.
pjrt::BufferPtr flat(const at::Tensor& t, ir::DType dt) {
  at::Tensor c = t.reshape({-1}).clone(at::MemoryFormat::Contiguous);
  eager::Runtime& rt = eager::Runtime::get();
  eager::StorageValue* s = aten::storage_value(c);
  pjrt::BufferPtr b = rt.device_value(s, "a collective");
  if (!b) {
    at::Tensor zeros = at::zeros({c.numel()}, c.options().device(at::kCPU));
    return rt.upload(zeros.data_ptr(), dt, {c.numel()}, t.device().index());
  }
  TORCH_CHECK(s->dtype() == dt, "tpu_dist: a ", c10::getDtypeNames(t.scalar_type()).first,
              " tensor is stored in another type on the device; collectives between thread ranks cannot take it");
  return b;
}

// A flat tpu tensor of `numel` elements holding `b`, shaped like `like`'s dtype and device.
at::Tensor wrap(pjrt::BufferPtr b, int64_t numel, const at::Tensor& like, ir::DType dt) {
  at::Tensor r = aten::empty_device({numel}, like.scalar_type(), like.device().index());
  eager::Runtime& rt = eager::Runtime::get();
  std::lock_guard<std::recursive_mutex> lock(rt.device_lock(like.device().index()));
  aten::storage_value(r)->set_buffer(std::move(b), dt);
  return r;
}

}  // namespace

namespace detail {

WithoutGil::WithoutGil() : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
WithoutGil::~WithoutGil() {
  if (state_) PyEval_RestoreThread(static_cast<PyThreadState*>(state_));
}

pjrt::ExecutablePtr replicated(const std::string& key, const std::function<std::string()>& text,
                               const std::vector<int64_t>& devices) {
  static auto* cache = new std::map<std::string, pjrt::ExecutablePtr>();
  std::ostringstream k;
  k << key;
  for (int64_t d : devices) k << " " << d;
  std::lock_guard<std::mutex> lock(programs_mu);
  pjrt::ExecutablePtr& exe = (*cache)[k.str()];
  if (!exe) {
    const std::string t = text();
    exe = eager::Runtime::get().compile_replicated(t, devices);
    texts().push_back(t);
  }
  return exe;
}

std::mutex& launch_mu() {
  static std::mutex m;
  return m;
}

eager::RunPtr finished_run() {
  auto run = std::make_shared<eager::Run>();
  run->settle(nullptr);
  return run;
}

std::vector<std::string> program_texts() {
  std::lock_guard<std::mutex> lock(programs_mu);
  return texts();
}

}  // namespace detail
using detail::finished_run;
using detail::WithoutGil;
using detail::launch_mu;
using detail::replicated;

std::shared_ptr<LocalGroup> LocalGroup::get(const std::string& name, int size) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<LocalGroup>> groups;
  std::lock_guard<std::mutex> lock(mu);
  auto g = groups[name].lock();
  if (!g) {
    g = std::make_shared<LocalGroup>(size);
    groups[name] = g;
  }
  TORCH_CHECK(g->size() == size, "tpu_dist: thread group '", name, "' has ", g->size(), " ranks, not ", size);
  return g;
}

namespace {

const char* mode_name(int mode) {
  return mode == 0 ? "Strict or Debug Eager" : mode == 1 ? "Fused Eager" : "a compiled function";
}

// The ranks `missing` says are absent, as "0, 2".
template <typename F>
std::string ranks_where(int size, F missing) {
  std::ostringstream who;
  bool first = true;
  for (int r = 0; r < size; ++r)
    if (missing(r)) {
      who << (first ? "" : ", ") << r;
      first = false;
    }
  return who.str();
}

}  // namespace

int64_t LocalGroup::issue(int rank, const std::string& signature, Mode mode, int device,
                          std::chrono::milliseconds timeout) {
  WithoutGil unlocked;
  std::unique_lock<std::mutex> lock(mu_);
  TORCH_CHECK(failed_.empty(), failed_);
  if (device >= 0) devices_[rank] = device;
  const int64_t seq = issued_[rank]++;
  Issued& row = issues_[seq];
  if (row.signature.empty()) {
    row.signature.resize(size_);
    row.mode.resize(size_, Mode::kEager);
  }
  row.signature[rank] = signature;
  row.mode[rank] = mode;
  if (++row.count == size_) {
    const bool same = std::all_of(row.signature.begin(), row.signature.end(),
                                  [&](const std::string& s) { return s == row.signature[0]; });
    const bool same_mode = std::all_of(row.mode.begin(), row.mode.end(), [&](Mode m) { return m == row.mode[0]; });
    if (!same || !same_mode) {
      std::ostringstream msg;
      msg << "tpu_dist: ranks issued different collectives as collective #" << seq + 1 << ":";
      for (int r = 0; r < size_; ++r)
        msg << "\n  rank " << r << ": " << row.signature[r]
            << (same_mode ? "" : std::string(" (in ") + mode_name(static_cast<int>(row.mode[r])) + ")");
      msg << (same ? "\nEvery rank must use the same eager mode, and compile the same functions."
                   : "\nEvery rank must issue the same collectives (op, dtype, shapes) in the same order.");
      failed_ = msg.str();
    }
    cv_.notify_all();
  } else {
    // A round that waits for this rank's program (another rank reached a
    // sync point) must not wait for this rank's next collective: the
    // program is materialized now.
    ++row.waiting;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    uint64_t pulled_at = ~uint64_t{0};
    while (row.count < size_ && failed_.empty()) {
      if (pulled_at != generation_ && arrived_ > 0 && entries_[rank].kind == Entry::kNone && devices_[rank] >= 0) {
        pulled_at = generation_;
        const int dev = devices_[rank];
        lock.unlock();
        pull(dev);
        lock.lock();
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        failed_ = "tpu_dist: rank(s) " + ranks_where(size_, [&](int r) { return issued_[r] <= seq; }) +
                  " did not reach collective #" + std::to_string(seq + 1) +
                  " within the process group's timeout (" + std::to_string(timeout.count()) + " ms); rank " +
                  std::to_string(rank) + " is waiting in " + signature;
        cv_.notify_all();
        break;
      }
      cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(20)));
    }
    --row.waiting;
  }
  if (row.count == size_ && row.waiting == 0) issues_.erase(seq);
  TORCH_CHECK(failed_.empty(), failed_);
  return seq;
}

void LocalGroup::gather(std::unique_lock<std::mutex>& lock, int rank, Entry entry, const std::function<void()>& last,
                        std::chrono::milliseconds timeout) {
  TORCH_CHECK(failed_.empty(), failed_);
  const uint64_t gen = generation_;
  const std::string mine = entry.signature;
  const int64_t seq = entry.seq;
  entries_[rank] = std::move(entry);
  if (++arrived_ == size_) {
    try {
      const Entry& first = entries_[0];
      if (std::any_of(entries_.begin(), entries_.end(),
                      [&](const Entry& e) { return e.signature != first.signature || e.kind != first.kind; })) {
        std::ostringstream msg;
        msg << "tpu_dist: ranks issued different collectives as collective #" << first.seq + 1 << ":";
        for (int r = 0; r < size_; ++r) msg << "\n  rank " << r << ": " << entries_[r].signature;
        msg << "\nEvery rank must issue the same collectives (op, dtype, shapes) in the same order.";
        throw std::runtime_error(msg.str());
      }
      last();
    } catch (const std::exception& e) {
      failed_ = e.what();
    }
    arrived_ = 0;
    for (auto& e : entries_) e = Entry{};
    ++generation_;
    cv_.notify_all();
  } else {
    // A rank that has not brought its program is asked to materialize it
    // once that program has had no op for a while (its thread waits on
    // something else, or ended), and after a second in any case.
    const auto start = std::chrono::steady_clock::now();
    auto next_check = start + std::chrono::milliseconds(50);
    while (generation_ == gen && failed_.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= start + timeout) {
        failed_ = "tpu_dist: rank(s) " + ranks_where(size_, [&](int r) { return entries_[r].kind == Entry::kNone; }) +
                  " did not reach collective #" + std::to_string(seq + 1) +
                  " within the process group's timeout (" + std::to_string(timeout.count()) + " ms); rank " +
                  std::to_string(rank) + " is waiting in " + mine;
        cv_.notify_all();
        break;
      }
      if (now >= next_check) {
        next_check = now + std::chrono::milliseconds(50);
        const bool long_wait = now - start >= std::chrono::seconds(1);
        std::vector<int> absent;
        for (int r = 0; r < size_; ++r)
          if (entries_[r].kind == Entry::kNone && devices_[r] >= 0) absent.push_back(devices_[r]);
        lock.unlock();
        eager::Runtime& rt = eager::Runtime::get();
        for (int dev : absent)
          if (long_wait || rt.fused(dev).idle_ns() >= 100'000'000) pull(dev);
        lock.lock();
        continue;
      }
      cv_.wait_until(lock, std::min(start + timeout, next_check));
    }
  }
  TORCH_CHECK(failed_.empty(), failed_);
}

pjrt::BufferPtr LocalGroup::meet(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction,
                                 ir::DType dtype, int64_t numel, std::chrono::milliseconds timeout) {
  eager::Runtime& rt = eager::Runtime::get();
  const bool fused = rt.mode() == eager::EagerMode::kFused;
  entry.seq = issue(rank, entry.signature, fused ? Mode::kFused : Mode::kEager, entry.device, timeout);
  // Its rounds come after those of the rank's programs that hold earlier
  // collectives (Fused Eager): they are materialized and run first.
  int dev;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dev = devices_[rank];
  }
  run_own(dev);
  if (fused) {
    Entry propose;
    propose.kind = Entry::kPropose;
    propose.signature = entry.signature;
    propose.device = entry.device;
    propose.seq = entry.seq;
    program_round(rank, std::move(propose), timeout);
  }
  return data_round(rank, std::move(entry), kind, reduction, dtype, numel, timeout);
}

pjrt::BufferPtr LocalGroup::data_round(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction,
                                       ir::DType dtype, int64_t numel, std::chrono::milliseconds timeout) {
  WithoutGil unlocked;
  entry.kind = Entry::kData;
  std::unique_lock<std::mutex> lock(mu_);
  gather(lock, rank, std::move(entry), [&] { execute(kind, reduction, dtype, numel); }, timeout);
  return results_.empty() ? nullptr : results_[rank];
}

std::vector<int64_t> LocalGroup::devices() const {
  std::vector<int64_t> devices;
  for (auto& e : entries_) devices.push_back(e.device);
  if (std::set<int64_t>(devices.begin(), devices.end()).size() != devices.size())
    throw std::runtime_error("tpu_dist: thread ranks must each use their own tpu device; two share one");
  return devices;
}

void LocalGroup::execute(ops::Collective kind, ops::Reduction reduction, ir::DType dtype, int64_t numel) {
  results_.assign(size_, nullptr);
  if (!entries_[0].input || numel == 0) return;  // a barrier, or nothing to move
  const std::vector<int64_t> devices = this->devices();
  const std::string text = ops::collective_module(kind, reduction, dtype, numel, size_);
  pjrt::ExecutablePtr exe = replicated(text, [&] { return text; }, devices);

  std::vector<std::vector<pjrt::Buffer*>> args;
  for (auto& e : entries_) args.push_back({e.input.get()});
  std::vector<pjrt::ExecuteResult> out;
  {
    std::lock_guard<std::mutex> launch(launch_mu());
    out = exe->execute_replicated(args);
    for (auto& r : out) r.done->wait();
  }
  for (int r = 0; r < size_; ++r) results_[r] = out[r].outputs.at(0);
  ++executions_;
  ++stats().device_programs;
}

void LocalGroup::all_reduce(int rank, const at::Tensor& t, const ReduceOp& op, std::chrono::milliseconds timeout) {
  const ir::DType dt = aten::to_ir(t.scalar_type());
  const ops::Reduction red = reduction_of(op);
  const char* name = op.op_ == ReduceOp::SUM ? "sum" : op.op_ == ReduceOp::AVG ? "avg"
                     : op.op_ == ReduceOp::PREMUL_SUM ? "premul_sum" : op.op_ == ReduceOp::PRODUCT ? "product"
                     : op.op_ == ReduceOp::MIN ? "min" : "max";
  const std::string sig = describe("all_reduce", t, name);
  if (at::Tensor f = fused(rank, ops::Collective::kAllReduce, red, sig, premultiplied(t, op), timeout); f.defined()) {
    const_cast<at::Tensor&>(t).copy_(f.view(t.sizes()));
    return finish_average(t, op, size_);
  }
  Entry e = Entry::of(sig, t.device().index(), t.numel() ? flat(premultiplied(t, op), dt) : nullptr);
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kAllReduce, red, dt, t.numel(), timeout);
  if (!b) return;
  const_cast<at::Tensor&>(t).copy_(wrap(b, t.numel(), t, dt).view(t.sizes()));
  finish_average(t, op, size_);
}

void LocalGroup::all_gather_into(int rank, const at::Tensor& out, const at::Tensor& in,
                                 std::chrono::milliseconds timeout) {
  TORCH_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(),
              "tpu_dist: all_gather_into_tensor needs an output of ", size_, " x the input's elements and its dtype; got ",
              describe("output", out), " for ", describe("input", in));
  const ir::DType dt = aten::to_ir(in.scalar_type());
  const std::string sig = describe("all_gather", in);
  if (at::Tensor f = fused(rank, ops::Collective::kAllGather, ops::Reduction::kSum, sig, in, timeout); f.defined()) {
    const_cast<at::Tensor&>(out).copy_(f.view(out.sizes()));
    return;
  }
  Entry e = Entry::of(sig, in.device().index(), in.numel() ? flat(in, dt) : nullptr);
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kAllGather, ops::Reduction::kSum, dt, in.numel(), timeout);
  if (b) const_cast<at::Tensor&>(out).copy_(wrap(b, out.numel(), out, dt).view(out.sizes()));
}

void LocalGroup::reduce_scatter_into(int rank, const at::Tensor& out, const at::Tensor& in, const ReduceOp& op,
                                     std::chrono::milliseconds timeout) {
  TORCH_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(),
              "tpu_dist: reduce_scatter_tensor needs an input of ", size_, " x the output's elements and its dtype; got ",
              describe("input", in), " for ", describe("output", out));
  const ir::DType dt = aten::to_ir(in.scalar_type());
  const std::string sig = describe("reduce_scatter", in);
  if (at::Tensor f = fused(rank, ops::Collective::kReduceScatter, reduction_of(op), sig, premultiplied(in, op), timeout);
      f.defined()) {
    const_cast<at::Tensor&>(out).copy_(f.view(out.sizes()));
    return finish_average(out, op, size_);
  }
  Entry e = Entry::of(sig, in.device().index(), in.numel() ? flat(premultiplied(in, op), dt) : nullptr);
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kReduceScatter, reduction_of(op), dt, in.numel(), timeout);
  if (!b) return;
  const_cast<at::Tensor&>(out).copy_(wrap(b, out.numel(), out, dt).view(out.sizes()));
  finish_average(out, op, size_);
}

void LocalGroup::all_to_all_into(int rank, const at::Tensor& out, const at::Tensor& in,
                                 std::chrono::milliseconds timeout) {
  TORCH_CHECK(out.numel() == in.numel() && in.numel() % size_ == 0 && in.dim() > 0 && in.size(0) % size_ == 0,
              "tpu_dist: all_to_all_single between thread ranks needs equal splits of dim 0 (", size_, " ranks); got ",
              describe("input", in), " and ", describe("output", out));
  const ir::DType dt = aten::to_ir(in.scalar_type());
  const std::string sig = describe("all_to_all", in);
  if (at::Tensor f = fused(rank, ops::Collective::kAllToAll, ops::Reduction::kSum, sig, in, timeout); f.defined()) {
    const_cast<at::Tensor&>(out).copy_(f.view(out.sizes()));
    return;
  }
  Entry e = Entry::of(sig, in.device().index(), in.numel() ? flat(in, dt) : nullptr);
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kAllToAll, ops::Reduction::kSum, dt, in.numel(), timeout);
  if (b) const_cast<at::Tensor&>(out).copy_(wrap(b, out.numel(), out, dt).view(out.sizes()));
}

void LocalGroup::broadcast(int rank, const at::Tensor& t, int root, std::chrono::milliseconds timeout) {
  // XLA:CPU has no broadcast collective: gather every rank's copy, keep the root's.
  const ir::DType dt = aten::to_ir(t.scalar_type());
  const std::string sig = describe("broadcast", t, "root=" + std::to_string(root));
  if (at::Tensor f = fused(rank, ops::Collective::kAllGather, ops::Reduction::kSum, sig, t, timeout); f.defined()) {
    const_cast<at::Tensor&>(t).copy_(f.narrow(0, root * t.numel(), t.numel()).view(t.sizes()));
    return;
  }
  Entry e = Entry::of(sig, t.device().index(), t.numel() ? flat(t, dt) : nullptr);
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kAllGather, ops::Reduction::kSum, dt, t.numel(), timeout);
  if (!b) return;
  at::Tensor all = wrap(b, t.numel() * size_, t, dt);
  const_cast<at::Tensor&>(t).copy_(all.narrow(0, root * t.numel(), t.numel()).view(t.sizes()));
}

void LocalGroup::barrier(int rank, std::chrono::milliseconds timeout) {
  meet(rank, Entry::of("barrier", -1, nullptr), ops::Collective::kAllReduce, ops::Reduction::kSum, ir::DType::kF32, 0,
       timeout);
}

}  // namespace torchtpu::distributed
