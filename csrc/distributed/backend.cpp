#include "distributed/backend.h"

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <numeric>
#include <sstream>

#include "distributed/work.h"

namespace torchtpu::distributed {

Stats& stats() {
  static Stats s;
  return s;
}

namespace {

using Tensors = TpuBackend::Tensors;
using c10d::ReduceOp;

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << c10::getDtypeNames(t.scalar_type()).first << t.sizes();
  return s.str();
}

const char* reduction_name(const ReduceOp& op) {
  switch (op.op_) {
    case ReduceOp::SUM: return "sum";
    case ReduceOp::AVG: return "avg";
    case ReduceOp::PRODUCT: return "product";
    case ReduceOp::MIN: return "min";
    case ReduceOp::MAX: return "max";
    case ReduceOp::BAND: return "band";
    case ReduceOp::BOR: return "bor";
    case ReduceOp::BXOR: return "bxor";
    case ReduceOp::PREMUL_SUM: return "premul_sum";
    default: return "unknown";
  }
}

// Host copies of device tensors (contiguous, as Gloo needs them) ...
at::Tensor to_host(const at::Tensor& t) {
  if (!t.is_cpu()) stats().host_staged_bytes += static_cast<int64_t>(t.nbytes());
  return t.to(at::kCPU).contiguous();
}
Tensors to_host(const Tensors& ts) {
  Tensors h;
  for (auto& t : ts) h.push_back(to_host(t));
  return h;
}
// ... host buffers for outputs that are only written ...
at::Tensor blank(const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kCPU)); }
Tensors blank(const Tensors& ts) {
  Tensors h;
  for (auto& t : ts) h.push_back(blank(t));
  return h;
}
// ... and the results copied back into the device tensors in place.
void back(const at::Tensor& dev, const at::Tensor& host) {
  if (!dev.is_cpu()) stats().host_staged_bytes += static_cast<int64_t>(host.nbytes());
  const_cast<at::Tensor&>(dev).copy_(host);
}
void back(const Tensors& dev, const Tensors& host) {
  for (size_t i = 0; i < dev.size(); ++i) back(dev[i], host[i]);
}

// The reduction Gloo runs for `op`. Gloo has neither an average nor a
// pre-multiplied sum: both become a sum, with the factor applied to the host
// copies before it (pre-multiply) or to the results after it (average).
ReduceOp host_reduction(const ReduceOp& op, Tensors& inputs) {
  if (op.op_ == ReduceOp::AVG) return ReduceOp::SUM;
  if (op.op_ != ReduceOp::PREMUL_SUM) return op;
  auto* f = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(f, "tpu_dist: PREMUL_SUM without a factor");
  for (auto& h : inputs) {
    if (f->tensor_factor.defined()) h.mul_(f->tensor_factor.to(at::kCPU));
    else h.mul_(f->double_factor);
  }
  return ReduceOp::SUM;
}
// Whether host_reduction can run off the issuing thread: a pre-multiplied
// sum's factor is a number or a CPU tensor, not a device value to read.
bool queueable(const ReduceOp& op) {
  if (op.op_ != ReduceOp::PREMUL_SUM) return true;
  auto* f = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  return f && (!f->tensor_factor.defined() || f->tensor_factor.is_cpu());
}
void finish_reduction(const ReduceOp& op, Tensors& results, int size) {
  if (op.op_ != ReduceOp::AVG) return;
  for (auto& h : results) {
    if (at::isIntegralType(h.scalar_type(), /*includeBool=*/true)) h.div_(size, "trunc");
    else h.div_(size);
  }
}

TpuBackend::Work done(int rank, c10d::OpType type, Tensors outputs = {}) {
  return c10::make_intrusive<DoneWork>(rank, type, std::move(outputs));
}

Tensors flat(const std::vector<Tensors>& lists) {
  Tensors all;
  for (auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}

// DDP's step timing on tpu (DDP logging, `_get_ddp_logging_data`): host
// times at the moments DDP records them, as its CPU timer takes them.
class HostTimer final : public c10d::Timer {
 public:
  explicit HostTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    int64_t a = getTimeRef(start), b = getTimeRef(end);
    if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a) return std::nullopt;
    return b - a;
  }
};
}  // namespace

TpuBackend::TpuBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> host)
    : c10d::Backend(rank, size), consensus_(std::make_unique<Consensus>(store, rank, size, timeout)),
      host_(std::move(host)), timeout_(timeout), queue_(std::make_unique<StagingQueue>()) {
  TORCH_CHECK(host_, "tpu_dist needs a host backend");
}

TpuBackend::TpuBackend(std::shared_ptr<LocalGroup> local, int rank, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, local->size()), local_(std::move(local)), timeout_(timeout) {}

void TpuBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  if (consensus_) consensus_->set_timeout(timeout);
  if (host_) host_->setTimeout(timeout);
}

uint64_t TpuBackend::getSequenceNumberForGroup() {
  return consensus_ ? consensus_->sequence() : static_cast<uint64_t>(local_->executions());
}

void TpuBackend::local_only(const char* op) const {
  TORCH_CHECK(false, "tpu_dist: ", op, " is not supported between ranks that are threads of one process; they "
              "support all_reduce, all_gather, reduce_scatter, all_to_all_single (equal splits), broadcast, reduce, "
              "gather and barrier");
}

void TpuBackend::agree(const std::string& op, const Tensors& tensors, const std::string& extra, bool queued) {
  if (queued) queue_->check();
  else queue_->drain();
  std::ostringstream sig;
  sig << op;
  if (!extra.empty()) sig << "(" << extra << ")";
  for (size_t i = 0; i < tensors.size(); ++i) sig << (i ? ", " : " ") << describe(tensors[i]);
  consensus_->agree(sig.str());
  ++stats().collectives;
  on_device_ = std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) { return !t.is_cpu(); });
}

TpuBackend::Tensors TpuBackend::staged(const Tensors& tensors) {
  constexpr int64_t kKeptBytes = int64_t{512} << 20;
  Tensors h;
  for (const at::Tensor& t : tensors) {
    if (t.is_cpu()) {
      h.push_back(t.contiguous());
      continue;
    }
    stats().host_staged_bytes += static_cast<int64_t>(t.nbytes());
    at::Tensor& kept = staging_[{static_cast<int>(t.scalar_type()), t.numel()}];
    // Reused only when nothing else holds it (an upload from it may still run).
    if (!kept.defined() || kept.storage().use_count() != 1) {
      if (!kept.defined()) staging_bytes_ += static_cast<int64_t>(t.nbytes());
      kept = at::empty({t.numel()}, t.options().device(at::kCPU));
    }
    at::Tensor buffer = kept.view(t.sizes());
    buffer.copy_(t);
    h.push_back(std::move(buffer));
  }
  if (staging_bytes_ > kKeptBytes) {  // sizes vary: keep only what this call used
    std::map<std::pair<int, int64_t>, at::Tensor> used;
    staging_bytes_ = 0;
    for (const at::Tensor& t : tensors)
      if (!t.is_cpu()) {
        auto key = std::make_pair(static_cast<int>(t.scalar_type()), t.numel());
        if (!used.count(key)) staging_bytes_ += static_cast<int64_t>(t.nbytes());
        used[key] = staging_[key];
      }
    staging_ = std::move(used);
  }
  return h;
}

std::string TpuBackend::failure_text(const char* op) const {
  return std::string("tpu_dist: ") + op + " failed on rank " + std::to_string(rank_) + " (collective #" +
         std::to_string(consensus_->sequence()) + ")";
}

void TpuBackend::run(const char* op, const Work& work) {
  if (on_device_) ++stats().host_staged;
  try {
    work->wait();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "tpu_dist: ", op, " failed on rank ", rank_, " (collective #", consensus_->sequence(),
                "): ", e.what());
  }
}

TpuBackend::Work TpuBackend::broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) {
  if (local_) {
    ++stats().collectives;
    for (auto& t : tensors) local_->broadcast(rank_, t, static_cast<int>(opts.rootRank), timeout_);
    return done(rank_, c10d::OpType::BROADCAST, tensors);
  }
  agree("broadcast", tensors, "root=" + std::to_string(opts.rootRank));
  Tensors h = rank_ == opts.rootRank ? to_host(tensors) : blank(tensors);
  run("broadcast", host_->broadcast(h, opts));
  if (rank_ != opts.rootRank) back(tensors, h);
  return done(rank_, c10d::OpType::BROADCAST, tensors);
}

TpuBackend::Work TpuBackend::reduce_all(const char* op, c10d::OpType type, Tensors& tensors, const ReduceOp& reduction,
                                        const std::function<Work(Tensors&, const ReduceOp&)>& launch) {
  if (local_) {
    ++stats().collectives;
    for (auto& t : tensors) local_->all_reduce(rank_, t, reduction, timeout_);
    return done(rank_, type, tensors);
  }
  const bool queued = queueable(reduction) && StagingQueue::applies(tensors);
  agree(op, tensors, reduction_name(reduction), queued);
  if (queued) {
    stats().host_staged += 1;
    for (const at::Tensor& t : tensors) stats().host_staged_bytes += 2 * static_cast<int64_t>(t.nbytes());
    queue_->submit("c10d::allreduce_", failure_text(op), tensors, tensors,
                   [this, launch, reduction](Tensors& in, Tensors& out) {
                     launch(in, host_reduction(reduction, in))->wait();
                     finish_reduction(reduction, in, size_);
                     out = in;
                   });
    return done(rank_, type, tensors);
  }
  Tensors h = staged(tensors);
  run(op, launch(h, host_reduction(reduction, h)));
  finish_reduction(reduction, h, size_);
  back(tensors, h);
  return done(rank_, type, tensors);
}

TpuBackend::Work TpuBackend::allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) {
  return reduce_all("all_reduce", c10d::OpType::ALLREDUCE, tensors, opts.reduceOp,
                    [this, opts](Tensors& h, const ReduceOp& r) {
                      c10d::AllreduceOptions o = opts;
                      o.reduceOp = r;
                      return host_->allreduce(h, o);
                    });
}

TpuBackend::Work TpuBackend::allreduce_coalesced(Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return reduce_all("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, opts.reduceOp,
                    [this, opts](Tensors& h, const ReduceOp& r) {
                      c10d::AllreduceCoalescedOptions o = opts;
                      o.reduceOp = r;
                      return host_->allreduce_coalesced(h, o);
                    });
}

TpuBackend::Work TpuBackend::reduce(Tensors& tensors, const c10d::ReduceOptions& opts) {
  if (local_) {  // every rank reduces; only the root keeps the result
    ++stats().collectives;
    for (auto& t : tensors) {
      at::Tensor r = t.clone();
      local_->all_reduce(rank_, r, opts.reduceOp, timeout_);
      if (rank_ == opts.rootRank) t.copy_(r);
    }
    return done(rank_, c10d::OpType::REDUCE, tensors);
  }
  agree("reduce", tensors, std::string(reduction_name(opts.reduceOp)) + ", root=" + std::to_string(opts.rootRank));
  Tensors h = to_host(tensors);
  c10d::ReduceOptions o = opts;
  o.reduceOp = host_reduction(opts.reduceOp, h);
  run("reduce", host_->reduce(h, o));
  if (rank_ == opts.rootRank) {
    finish_reduction(opts.reduceOp, h, size_);
    back(tensors, h);
  }
  return done(rank_, c10d::OpType::REDUCE, tensors);
}

TpuBackend::Work TpuBackend::allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                                       const c10d::AllgatherOptions& opts) {
  if (local_) {
    ++stats().collectives;
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor all = at::empty({size_ * inputs[i].numel()}, inputs[i].options());
      local_->all_gather_into(rank_, all, inputs[i], timeout_);
      for (int r = 0; r < size_; ++r)
        outputs[i][r].copy_(all.narrow(0, r * inputs[i].numel(), inputs[i].numel()).view(outputs[i][r].sizes()));
    }
    return done(rank_, c10d::OpType::ALLGATHER, flat(outputs));
  }
  agree("all_gather", inputs);
  Tensors hi = to_host(inputs);
  std::vector<Tensors> ho;
  for (auto& l : outputs) ho.push_back(blank(l));
  run("all_gather", host_->allgather(ho, hi, opts));
  for (size_t i = 0; i < outputs.size(); ++i) back(outputs[i], ho[i]);
  return done(rank_, c10d::OpType::ALLGATHER, flat(outputs));
}

TpuBackend::Work TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                             const c10d::AllgatherOptions& opts) {
  if (local_) {
    ++stats().collectives;
    local_->all_gather_into(rank_, output, input, timeout_);
    return done(rank_, c10d::OpType::_ALLGATHER_BASE, {output});
  }
  const bool queued = StagingQueue::applies({input, output});
  agree("all_gather_into_tensor", {input, output}, "", queued);
  if (queued) {
    stats().host_staged += 1;
    stats().host_staged_bytes += static_cast<int64_t>(input.nbytes() + output.nbytes());
    queue_->submit("c10d::_allgather_base_", failure_text("all_gather_into_tensor"), {input}, {output},
                   [this, opts](Tensors& in, Tensors& out) { host_->_allgather_base(out[0], in[0], opts)->wait(); });
    return done(rank_, c10d::OpType::_ALLGATHER_BASE, {output});
  }
  at::Tensor hi = to_host(input), ho = blank(output);
  run("all_gather_into_tensor", host_->_allgather_base(ho, hi, opts));
  back(output, ho);
  return done(rank_, c10d::OpType::_ALLGATHER_BASE, {output});
}

TpuBackend::Work TpuBackend::allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                                                 const c10d::AllgatherOptions& opts) {
  if (local_) local_only("all_gather_coalesced");
  agree("all_gather_coalesced", inputs);
  Tensors hi = to_host(inputs);
  std::vector<Tensors> ho;
  for (auto& l : outputs) ho.push_back(blank(l));
  run("all_gather_coalesced", host_->allgather_coalesced(ho, hi, opts));
  for (size_t i = 0; i < outputs.size(); ++i) back(outputs[i], ho[i]);
  return done(rank_, c10d::OpType::ALLGATHER_COALESCED, flat(outputs));
}

TpuBackend::Work TpuBackend::allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  if (local_) {
    ++stats().collectives;
    for (size_t i = 0; i < inputs.size(); ++i) local_->all_gather_into(rank_, outputs[i], inputs[i], timeout_);
    return done(rank_, c10d::OpType::COALESCED, outputs);
  }
  agree("all_gather_into_tensor_coalesced", inputs);
  Tensors hi = to_host(inputs), ho = blank(outputs);
  run("all_gather_into_tensor_coalesced", host_->allgather_into_tensor_coalesced(ho, hi, opts));
  back(outputs, ho);
  return done(rank_, c10d::OpType::COALESCED, outputs);
}

TpuBackend::Work TpuBackend::gather(std::vector<Tensors>& outputs, Tensors& inputs,
                                    const c10d::GatherOptions& opts) {
  if (local_) {  // every rank gathers; only the root keeps the result
    ++stats().collectives;
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor all = at::empty({size_ * inputs[i].numel()}, inputs[i].options());
      local_->all_gather_into(rank_, all, inputs[i], timeout_);
      if (rank_ == opts.rootRank)
        for (int r = 0; r < size_; ++r)
          outputs[i][r].copy_(all.narrow(0, r * inputs[i].numel(), inputs[i].numel()).view(outputs[i][r].sizes()));
    }
    return done(rank_, c10d::OpType::GATHER, flat(outputs));
  }
  agree("gather", inputs, "root=" + std::to_string(opts.rootRank));
  Tensors hi = to_host(inputs);
  std::vector<Tensors> ho;
  for (auto& l : outputs) ho.push_back(blank(l));
  run("gather", host_->gather(ho, hi, opts));
  for (size_t i = 0; i < outputs.size(); ++i) back(outputs[i], ho[i]);
  return done(rank_, c10d::OpType::GATHER, flat(outputs));
}

TpuBackend::Work TpuBackend::scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                     const c10d::ScatterOptions& opts) {
  if (local_) local_only("scatter");
  agree("scatter", outputs, "root=" + std::to_string(opts.rootRank));
  std::vector<Tensors> hi;
  for (auto& l : inputs) hi.push_back(to_host(l));
  Tensors ho = blank(outputs);
  run("scatter", host_->scatter(ho, hi, opts));
  back(outputs, ho);
  return done(rank_, c10d::OpType::SCATTER, outputs);
}

TpuBackend::Work TpuBackend::reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                            const c10d::ReduceScatterOptions& opts) {
  if (local_) {
    ++stats().collectives;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensors pieces;
      for (auto& t : inputs[i]) pieces.push_back(t.reshape({-1}));
      local_->reduce_scatter_into(rank_, outputs[i], at::cat(pieces), opts.reduceOp, timeout_);
    }
    return done(rank_, c10d::OpType::REDUCE_SCATTER, outputs);
  }
  agree("reduce_scatter", flat(inputs), reduction_name(opts.reduceOp));
  std::vector<Tensors> hi;
  for (auto& l : inputs) hi.push_back(to_host(l));
  Tensors ho = blank(outputs);
  c10d::ReduceScatterOptions o = opts;
  for (auto& l : hi) o.reduceOp = host_reduction(opts.reduceOp, l);
  run("reduce_scatter", host_->reduce_scatter(ho, hi, o));
  finish_reduction(opts.reduceOp, ho, size_);
  back(outputs, ho);
  return done(rank_, c10d::OpType::REDUCE_SCATTER, outputs);
}

TpuBackend::Work TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                  const c10d::ReduceScatterOptions& opts) {
  if (local_) {
    ++stats().collectives;
    local_->reduce_scatter_into(rank_, output, input, opts.reduceOp, timeout_);
    return done(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, {output});
  }
  const bool queued = queueable(opts.reduceOp) && StagingQueue::applies({input, output});
  agree("reduce_scatter_tensor", {input, output}, reduction_name(opts.reduceOp), queued);
  if (queued) {
    stats().host_staged += 1;
    stats().host_staged_bytes += static_cast<int64_t>(input.nbytes() + output.nbytes());
    queue_->submit("c10d::_reduce_scatter_base_", failure_text("reduce_scatter_tensor"), {input}, {output},
                   [this, opts](Tensors& in, Tensors& out) {
                     c10d::ReduceScatterOptions o = opts;
                     o.reduceOp = host_reduction(opts.reduceOp, in);
                     host_->_reduce_scatter_base(out[0], in[0], o)->wait();
                     finish_reduction(opts.reduceOp, out, size_);
                   });
    return done(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, {output});
  }
  Tensors hi = {to_host(input)}, ho = {blank(output)};
  c10d::ReduceScatterOptions o = opts;
  o.reduceOp = host_reduction(opts.reduceOp, hi);
  run("reduce_scatter_tensor", host_->_reduce_scatter_base(ho[0], hi[0], o));
  finish_reduction(opts.reduceOp, ho, size_);
  back(output, ho[0]);
  return done(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

TpuBackend::Work TpuBackend::reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  if (local_) {
    ++stats().collectives;
    for (size_t i = 0; i < inputs.size(); ++i) local_->reduce_scatter_into(rank_, outputs[i], inputs[i], opts.reduceOp, timeout_);
    return done(rank_, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, outputs);
  }
  agree("reduce_scatter_tensor_coalesced", inputs, reduction_name(opts.reduceOp));
  Tensors hi = to_host(inputs), ho = blank(outputs);
  c10d::ReduceScatterOptions o = opts;
  o.reduceOp = host_reduction(opts.reduceOp, hi);
  run("reduce_scatter_tensor_coalesced", host_->reduce_scatter_tensor_coalesced(ho, hi, o));
  finish_reduction(opts.reduceOp, ho, size_);
  back(outputs, ho);
  return done(rank_, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, outputs);
}

TpuBackend::Work TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                           std::vector<int64_t>& output_splits,
                                           std::vector<int64_t>& input_splits,
                                           const c10d::AllToAllOptions& opts) {
  if (local_) {
    auto even = [&](const std::vector<int64_t>& s) {
      return s.empty() || std::all_of(s.begin(), s.end(), [&](int64_t v) { return v == s[0]; });
    };
    if (!even(output_splits) || !even(input_splits)) local_only("all_to_all_single with uneven splits");
    ++stats().collectives;
    local_->all_to_all_into(rank_, output, input, timeout_);
    return done(rank_, c10d::OpType::ALLTOALL_BASE, {output});
  }
  // Split sizes may differ between ranks: only the dtype must agree.
  const bool even = output_splits.empty() && input_splits.empty();
  agree("all_to_all_single", even ? Tensors{input} : Tensors{},
        even ? "" : std::string(c10::getDtypeNames(input.scalar_type()).first) + ", uneven splits");
  at::Tensor hi = to_host(input), ho = blank(output);
  run("all_to_all_single", host_->alltoall_base(ho, hi, output_splits, input_splits, opts));
  back(output, ho);
  return done(rank_, c10d::OpType::ALLTOALL_BASE, {output});
}

TpuBackend::Work TpuBackend::alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) {
  if (local_) local_only("all_to_all");
  // Gloo has only the single-tensor form: one flat buffer, split by element count.
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              "tpu_dist: all_to_all needs one input and one output tensor per rank (", size_, "), got ",
              inputs.size(), " and ", outputs.size());
  agree("all_to_all", {}, std::string(c10::getDtypeNames(inputs[0].scalar_type()).first));
  std::vector<int64_t> in_splits, out_splits;
  Tensors pieces;
  for (auto& t : inputs) {
    pieces.push_back(to_host(t).reshape({-1}));
    in_splits.push_back(t.numel());
  }
  for (auto& t : outputs) out_splits.push_back(t.numel());
  at::Tensor hi = at::cat(pieces), ho = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})},
                                                   hi.options());
  // Gloo may take the split vectors' contents: it gets copies.
  std::vector<int64_t> out_arg = out_splits, in_arg = in_splits;
  run("all_to_all", host_->alltoall_base(ho, hi, out_arg, in_arg, opts));
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    back(outputs[i], ho.narrow(0, offset, out_splits[i]).view(outputs[i].sizes()));
    offset += out_splits[i];
  }
  return done(rank_, c10d::OpType::ALLTOALL, outputs);
}

TpuBackend::Work TpuBackend::send(Tensors& tensors, int dst, int tag) {
  if (local_) local_only("send");
  queue_->drain();
  ++stats().point_to_point;
  on_device_ = !tensors.empty() && !tensors[0].is_cpu();
  Tensors h = to_host(tensors);  // kept alive by the work until it is waited for
  auto work = c10::make_intrusive<HostWork>(rank_, c10d::OpType::SEND, host_->send(h, dst, tag), nullptr, h);
  return keep(work);
}

TpuBackend::Work TpuBackend::recv(Tensors& tensors, int src, int tag) {
  if (local_) local_only("recv");
  queue_->drain();
  ++stats().point_to_point;
  on_device_ = !tensors.empty() && !tensors[0].is_cpu();
  Tensors h = blank(tensors);
  auto work = c10::make_intrusive<HostWork>(rank_, c10d::OpType::RECV, host_->recv(h, src, tag),
                                            [dev = tensors, h] { back(dev, h); }, tensors);
  return keep(work);
}

void TpuBackend::startCoalescing() {
  coalescing_ = true;
  coalesced_.clear();
}

TpuBackend::Work TpuBackend::endCoalescing() {
  coalescing_ = false;
  return c10::make_intrusive<GroupWork>(rank_, std::move(coalesced_));
}

TpuBackend::Work TpuBackend::keep(Work work) {
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

TpuBackend::Work TpuBackend::barrier(const c10d::BarrierOptions& opts) {
  if (local_) {
    ++stats().collectives;
    local_->barrier(rank_, timeout_);
    return done(rank_, c10d::OpType::BARRIER);
  }
  // Agreement waits for every rank: it is the barrier.
  agree("barrier", {});
  return done(rank_, c10d::OpType::BARRIER);
}

}  // namespace torchtpu::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torchtpu::distributed::HostTimer);
}  // namespace c10d
