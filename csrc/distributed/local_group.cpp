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
std::vector<std::string>& program_texts() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

// The executable of the program `key` (its text, or a digest of it) for one
// replica per device of `devices`, compiled from text() on first use; kept
// for the process (groups of the same devices share it).
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
    program_texts().push_back(t);
  }
  return exe;
}

// The CPU client runs one collective launch at a time: groups take turns.
std::mutex& launch_mu() {
  static std::mutex m;
  return m;
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

// Lets other Python threads run while this one waits for the other ranks
// (a compiled call comes here holding the GIL; the other ranks are threads).
class WithoutGil {
 public:
  WithoutGil() : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~WithoutGil() {
    if (state_) PyEval_RestoreThread(state_);
  }
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  PyThreadState* state_;
};

// A run for values computed outside the executor, once they are.
eager::RunPtr finished_run() {
  auto run = std::make_shared<eager::Run>();
  run->settle(nullptr);
  return run;
}

}  // namespace

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

void LocalGroup::gather(std::unique_lock<std::mutex>& lock, int rank, Entry entry, const std::function<void()>& last,
                        std::chrono::milliseconds timeout) {
  TORCH_CHECK(failed_.empty(), failed_);
  const uint64_t gen = generation_;
  const std::string mine = entry.signature;
  entries_[rank] = std::move(entry);
  if (++arrived_ == size_) {
    try {
      const std::string& first = entries_[0].signature;
      if (std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.signature != first; })) {
        std::ostringstream msg;
        msg << "tpu_dist: ranks issued different collectives as collective #" << generation_ + 1 << ":";
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
  } else if (!cv_.wait_for(lock, timeout, [&] { return generation_ != gen || !failed_.empty(); })) {
    std::ostringstream who;
    bool first = true;
    for (int r = 0; r < size_; ++r) {
      if (entries_[r].signature.empty()) {
        who << (first ? "" : ", ") << r;
        first = false;
      }
    }
    failed_ = "tpu_dist: rank(s) " + who.str() + " did not reach collective #" + std::to_string(gen + 1) +
              " within the process group's timeout (" + std::to_string(timeout.count()) + " ms); rank " +
              std::to_string(rank) + " is waiting in " + mine;
    cv_.notify_all();
  }
  TORCH_CHECK(failed_.empty(), failed_);
}

pjrt::BufferPtr LocalGroup::meet(int rank, Entry entry, ops::Collective kind, ops::Reduction reduction,
                                 ir::DType dtype, int64_t numel, std::chrono::milliseconds timeout) {
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

bool LocalGroup::meet_program(int rank, Entry entry, const Program& program, std::chrono::milliseconds timeout,
                              std::string* apart) {
  std::unique_lock<std::mutex> lock(mu_);
  programs_[rank] = &program;
  try {
    gather(lock, rank, std::move(entry), [&] { programs_ran_ = run_programs(); }, timeout);
  } catch (...) {
    programs_[rank] = nullptr;
    throw;
  }
  programs_[rank] = nullptr;
  if (apart) *apart = programs_apart_;
  return programs_ran_;
}

bool LocalGroup::run_programs() {
  for (const Program* p : programs_)
    if (!p) throw std::runtime_error("tpu_dist: ranks ran collective #" + std::to_string(generation_ + 1) +
                                     " in different eager modes; every rank must use the same mode");
  const Program& first = *programs_[0];
  programs_apart_ = "the ranks' programs differ";
  for (const Program* p : programs_)
    if (!(p->key == first.key)) return false;
  const std::vector<int64_t> devices = this->devices();
  // The values the programs read (earlier programs on the executor may still
  // compute them). One that failed fails that rank's program alone: the ranks
  // then run theirs apart (staged), keeping what each computed before the
  // collective, and the collective raises on every rank.
  for (int r = 0; r < size_; ++r)
    for (const eager::Task::Arg& a : programs_[r]->task->args)
      if (a.slot) {
        a.slot->wait();
        if (a.slot->error()) {
          programs_apart_ = "rank " + std::to_string(r) + "'s program reads a value that failed: " +
                            a.slot->error()->what();
          return false;
        }
      }
  std::shared_ptr<const eager::DeviceError> failure;
  std::vector<pjrt::ExecuteResult> out;
  {
    try {
      pjrt::ExecutablePtr exe = replicated(first.key.hex(), [&] {
        ir::Graph g = *first.task->graph;
        g.replicas = size_;
        g.donations.clear();
        return ir::print_stablehlo(g);
      }, devices);
      std::vector<std::vector<pjrt::Buffer*>> args;
      for (const Program* p : programs_) {
        args.emplace_back();
        for (const eager::Task::Arg& a : p->task->args)
          args.back().push_back(a.slot ? a.slot->buffer().get() : a.scalar.get());
      }
      std::lock_guard<std::mutex> launch(launch_mu());
      out = exe->execute_replicated(args);
      for (auto& r : out) r.done->wait();
    } catch (const pjrt::Error& e) {
      failure = std::make_shared<eager::DeviceError>(e.what(), e.code(), first.task->sites);
    } catch (const std::exception& e) {
      failure = std::make_shared<eager::DeviceError>(e.what(), 0, first.task->sites);
    }
  }
  for (int r = 0; r < size_; ++r) {
    eager::Task& t = *programs_[r]->task;
    if (failure) {
      for (const eager::SlotPtr& o : t.outputs) o->fail(failure);
      continue;
    }
    eager::RunPtr run = finished_run();
    for (size_t i = 0; i < t.outputs.size(); ++i) t.outputs[i]->fill(out[r].outputs.at(i), run);
  }
  if (!failure) {
    ++executions_;
    ++stats().device_programs;
    ++stats().fused_programs;
  }
  return true;
}

at::Tensor LocalGroup::fused(int rank, ops::Collective kind, ops::Reduction reduction, const std::string& signature,
                             const at::Tensor& in, std::chrono::milliseconds timeout) {
  eager::Runtime& rt = eager::Runtime::get();
  const int dev = in.device().index();
  timeout_ms_ = timeout.count();
  eager::Capture* capture = eager::Capture::active(dev);
  if (in.numel() == 0 || (!capture && rt.mode() != eager::EagerMode::kFused)) return {};
  if (capture && !capture->join(shared_from_this(), rank, signature)) return {};
  const ir::DType dt = aten::to_ir(in.scalar_type());
  at::Tensor result;
  std::unique_ptr<eager::Task> task;
  {
    aten::Kernel k(ops::collective_name(kind), in.device());
    ir::Value x = k.b().reshape(k.in(in), {in.numel()});
    ir::Value y = ops::collective_node(k.b().graph(), kind, reduction, x, size_);
    result = k.out(y, in.scalar_type());
    k.b().graph().replicas = size_;  // the pending graph is not cut after this op (FusedGraph::append)
    k.run();
    if (capture) return result;  // a node of the captured program
    task = rt.fused(dev).take_task(aten::storage_value(result));
  }
  // The collective is the program's last node and its result one of the outputs.
  size_t out_index = 0;
  const ir::Graph* g = task ? task->graph.get() : nullptr;
  const int32_t last = g ? static_cast<int32_t>(g->nodes().size()) - 1 : -1;
  while (g && out_index < g->outputs.size() && g->outputs[out_index].node != last) ++out_index;
  if (!g || out_index == g->outputs.size() || g->nodes().back().operands.size() != 1)
    throw std::logic_error("tpu_dist: the fused program does not end with its collective");

  const Program program{task.get(), ir::graph_key(*g, ir::GraphKey{})};
  std::string error;
  try {
    if (meet_program(rank, Entry{signature, dev, nullptr}, program, timeout)) return result;
  } catch (const std::exception& e) {
    error = e.what();
  }

  // The programs differ (or the collective failed): this rank's program runs
  // without the collective, whose input becomes an output in its place.
  ++stats().staged_programs;
  eager::SlotPtr collected = task->outputs[out_index];
  auto operand = std::make_shared<eager::Slot>();
  {
    ir::Graph prefix = *g;
    const ir::Value x = prefix.nodes().back().operands[0];
    prefix.mutable_nodes().pop_back();
    prefix.outputs[out_index] = x;
    auto& d = prefix.donations;
    d.erase(std::remove_if(d.begin(), d.end(), [&](const auto& p) { return p.second == static_cast<int>(out_index); }),
            d.end());
    task->graph = std::make_shared<const ir::Graph>(std::move(prefix));
    task->outputs[out_index] = operand;
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
    try {
      rt.submit(std::move(task));
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  // Then the collective alone, with the other ranks.
  if (error.empty()) {
    operand->wait();
    std::shared_ptr<const eager::DeviceError> input_error = operand->error();
    Entry e{input_error ? signature + " (its input failed)" : signature, dev, input_error ? nullptr : operand->buffer()};
    try {
      pjrt::BufferPtr b = meet(rank, std::move(e), kind, reduction, dt, in.numel(), timeout);
      if (b) collected->fill(std::move(b), finished_run());
      else collected->fail(input_error);
      return result;
    } catch (const std::exception& ex) {
      error = ex.what();
    }
  }
  collected->fail(std::make_shared<eager::DeviceError>(error, 0));
  TORCH_CHECK(false, error);
}

void LocalGroup::run_program(int rank, std::unique_ptr<eager::Task> task, const std::string& signature) {
  Program program{task.get(), task->key};
  if (program.key == ir::GraphKey{}) program.key = ir::graph_key(*task->graph, ir::GraphKey{});
  std::string error, apart;
  WithoutGil unlocked;
  try {
    if (meet_program(rank, Entry{"compiled program: " + signature, task->device, nullptr}, program,
                     std::chrono::milliseconds(timeout_ms_.load()), &apart)) {
      return;
    }
    error = "tpu_dist: the compiled programs holding " + signature + " could not run together: " + apart +
            " (compiled functions holding collectives must be the same on every rank)";
  } catch (const std::exception& e) {
    error = e.what();
  }
  auto failure = std::make_shared<eager::DeviceError>(error, 0, task->sites);
  for (const eager::SlotPtr& o : task->outputs) o->fail(failure);
}

std::vector<std::string> LocalGroup::compiled_programs() {
  std::lock_guard<std::mutex> lock(programs_mu);
  return program_texts();
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
  Entry e{sig, t.device().index(), t.numel() ? flat(premultiplied(t, op), dt) : nullptr};
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
  Entry e{sig, in.device().index(), in.numel() ? flat(in, dt) : nullptr};
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
  Entry e{sig, in.device().index(), in.numel() ? flat(premultiplied(in, op), dt) : nullptr};
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
  Entry e{sig, in.device().index(), in.numel() ? flat(in, dt) : nullptr};
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
  Entry e{sig, t.device().index(), t.numel() ? flat(t, dt) : nullptr};
  pjrt::BufferPtr b = meet(rank, std::move(e), ops::Collective::kAllGather, ops::Reduction::kSum, dt, t.numel(), timeout);
  if (!b) return;
  at::Tensor all = wrap(b, t.numel() * size_, t, dt);
  const_cast<at::Tensor&>(t).copy_(all.narrow(0, root * t.numel(), t.numel()).view(t.sizes()));
}

void LocalGroup::barrier(int rank, std::chrono::milliseconds timeout) {
  meet(rank, Entry{"barrier", -1, nullptr}, ops::Collective::kAllReduce, ops::Reduction::kSum, ir::DType::kF32, 0,
       timeout);
}

}  // namespace torchtpu::distributed
