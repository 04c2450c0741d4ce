// LocalGroup's programs that hold collectives: Fused Eager's (run whole with
// the other ranks' programs, or in stages) and compiled functions'.
#include <c10/util/Exception.h>

#include <algorithm>

#include "aten/tensor_ir.h"
#include "distributed/backend.h"
#include "distributed/local_group.h"
#include "eager/capture.h"
#include "eager/executor.h"
#include "eager/fused_graph.h"
#include "eager/runtime.h"
#include "ir/printer.h"
#include "ir/split.h"

namespace torchtpu::distributed {

using detail::finished_run;
using detail::launch_mu;
using detail::replicated;
using detail::WithoutGil;

bool LocalGroup::program_round(int rank, Entry entry, std::chrono::milliseconds timeout, std::string* apart) {
  WithoutGil unlocked;
  std::unique_lock<std::mutex> lock(mu_);
  gather(lock, rank, std::move(entry), [&] { programs_ran_ = run_programs(); }, timeout);
  if (apart) *apart = programs_apart_;
  return programs_ran_;
}

bool LocalGroup::run_programs() {
  programs_apart_ = "a rank's program does not start with this collective";
  for (const Entry& e : entries_)
    if (!e.program) return false;
  const Program& first = *entries_[0].program;
  programs_apart_ = "the ranks' programs differ";
  for (const Entry& e : entries_)
    if (!(e.program->key == first.key)) return false;
  const std::vector<int64_t> devices = this->devices();
  // The values the programs read (earlier programs on the executor may still
  // compute them). One that failed fails that rank's program alone: the ranks
  // then run theirs apart (staged), keeping what each computed before the
  // collective, and the collective raises on every rank.
  for (int r = 0; r < size_; ++r)
    for (const eager::Task::Arg& a : entries_[r].program->task->args)
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
  try {
    pjrt::ExecutablePtr exe = replicated(first.key.hex(), [&] {
      ir::Graph g = *first.task->graph;
      g.replicas = size_;
      g.donations.clear();
      return ir::print_stablehlo(g);
    }, devices);
    std::vector<std::vector<pjrt::Buffer*>> args;
    for (const Entry& e : entries_) {
      args.emplace_back();
      for (const eager::Task::Arg& a : e.program->task->args)
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
  for (int r = 0; r < size_; ++r) {
    eager::Task& t = *entries_[r].program->task;
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
  const int64_t seq = capture ? 0 : issue(rank, signature, Mode::kFused, dev, timeout);
  // The collective and its group join the pending graph together: no flush
  // in between (the device lock).
  std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
  aten::Kernel k(ops::collective_name(kind), in.device());
  ir::Value x = k.b().reshape(k.in(in), {in.numel()});
  ir::Value y = ops::collective_node(k.b().graph(), kind, reduction, x, size_);
  at::Tensor result = k.out(y, in.scalar_type());
  k.run();
  if (!capture) {
    eager::CollectiveCall call;
    call.group = shared_from_this();
    call.rank = rank;
    call.kind = static_cast<int>(kind);
    call.reduction = static_cast<int>(reduction);
    call.signature = signature;
    call.timeout_ms = timeout.count();
    call.seq = seq;
    rt.fused(dev).join_group(aten::storage_value(result), std::move(call));
  }
  return result;
}

void LocalGroup::run_fused(std::unique_ptr<eager::Task> task) {
  const eager::CollectiveCall& first = task->collectives.front();
  const bool mixed = std::any_of(task->collectives.begin(), task->collectives.end(),
                                 [&](const eager::CollectiveCall& c) { return c.group.get() != this; });
  Program program{task.get(), ir::graph_key(*task->graph, ir::GraphKey{})};
  Entry e = Entry::of(first.signature, task->device, nullptr);
  e.kind = Entry::kPropose;
  e.program = mixed ? nullptr : &program;
  e.seq = first.seq;
  std::string error;
  try {
    if (program_round(first.rank, std::move(e), std::chrono::milliseconds(first.timeout_ms))) return;
  } catch (const std::exception& ex) {
    error = ex.what();
  }
  ++stats().staged_programs;
  stage(std::move(task), std::move(error));
}

void LocalGroup::stage(std::unique_ptr<eager::Task> task, std::string error) {
  eager::Runtime& rt = eager::Runtime::get();
  const ir::Graph& g = *task->graph;
  std::vector<int32_t> nodes;
  for (const eager::CollectiveCall& c : task->collectives) nodes.push_back(c.node);
  std::shared_ptr<const eager::DeviceError> failure;
  ir::Split split;
  try {
    split = ir::split(g, nodes);
  } catch (const std::exception& e) {
    auto f = std::make_shared<eager::DeviceError>(e.what(), 0, task->sites);
    for (const eager::SlotPtr& o : task->outputs) o->fail(f);
    return;
  }
  // Each value number's value: the program's arguments, then what the
  // segments and the collectives compute.
  std::vector<eager::Task::Arg> values(split.values);
  for (size_t i = 0; i < task->args.size(); ++i) values[i] = task->args[i];
  size_t cut = 0;
  for (size_t k = 0; k < split.segments.size(); ++k) {
    ir::Split::Segment& seg = split.segments[k];
    if (!seg.outputs.empty()) {
      auto t = std::make_unique<eager::Task>();
      t->device = task->device;
      t->sites = task->sites;
      for (int p : seg.params) t->args.push_back(values[p]);
      for (int o : seg.outputs) {
        auto slot = std::make_shared<eager::Slot>();
        if (failure) slot->fail(failure);
        values[o].slot = slot;
        t->outputs.push_back(std::move(slot));
      }
      t->graph = std::make_shared<const ir::Graph>(std::move(seg.graph));
      if (!failure) {
        try {
          rt.queue(std::move(t));
        } catch (const std::exception&) {
          // its outputs failed with the error
        }
      }
    }
    // The collectives that run after this segment, each alone.
    for (; cut < split.cuts.size() && split.cuts[cut].after == static_cast<int>(k); ++cut) {
      const ir::Split::Cut& c = split.cuts[cut];
      const eager::CollectiveCall& call = task->collectives[cut];
      auto result = std::make_shared<eager::Slot>();
      values[c.result].slot = result;
      // The first collective may have failed already (its proposal): what
      // its program computed before it is kept.
      if (cut == 0 && !error.empty()) failure = std::make_shared<eager::DeviceError>(error, 0, task->sites);
      if (!failure) {
        std::shared_ptr<const eager::DeviceError> input_error;
        try {
          auto* group = static_cast<LocalGroup*>(call.group.get());
          const std::chrono::milliseconds timeout(call.timeout_ms);
          // The first collective's proposal was made (run_fused).
          if (cut > 0 || group != this) {
            Entry p = Entry::of(call.signature, task->device, nullptr);
            p.kind = Entry::kPropose;
            p.seq = call.seq;
            group->program_round(call.rank, std::move(p), timeout);
          }
          const ir::Type& type = g.type(g.nodes()[c.node].operands[0]);
          const eager::Task::Arg& operand = values[c.operand];
          pjrt::BufferPtr input = operand.scalar;
          if (operand.slot) {
            operand.slot->wait();
            input_error = operand.slot->error();
            input = operand.slot->buffer();
          }
          Entry e = Entry::of(input_error ? call.signature + " (its input failed)" : call.signature, task->device,
                              input_error ? nullptr : input);
          e.seq = call.seq;
          pjrt::BufferPtr b = group->data_round(call.rank, std::move(e), static_cast<ops::Collective>(call.kind),
                                                static_cast<ops::Reduction>(call.reduction), type.dtype, type.numel(),
                                                timeout);
          // No output: every rank's input failed, each with its own error.
          if (!b && !input_error) throw std::logic_error("tpu_dist: a collective returned nothing");
          if (b) result->fill(std::move(b), finished_run());
          else failure = input_error;
        } catch (const std::exception& e) {
          std::string what = e.what();
          if (input_error) {  // the rank's own input failed: its error is reported inside this one
            what += "\n(its input's error: " + std::string(input_error->what()) + ")";
            eager::Runtime::get().mark_raised(input_error);
          }
          failure = std::make_shared<eager::DeviceError>(what, 0, task->sites);
        }
      }
      if (failure) result->fail(failure);
    }
  }
  // The program's outputs take the values computed.
  for (size_t j = 0; j < task->outputs.size(); ++j) {
    const eager::Task::Arg& v = values[split.outputs[j]];
    if (v.slot) {
      v.slot->wait();
      if (auto e = v.slot->error()) task->outputs[j]->fail(e);
      else task->outputs[j]->fill(v.slot->buffer(), v.slot->run() ? v.slot->run() : finished_run());
    } else if (v.scalar) {
      task->outputs[j]->fill(v.scalar, finished_run());
    } else {
      task->outputs[j]->fail(std::make_shared<eager::DeviceError>("tpu_dist: a staged output has no value", 0));
    }
  }
}

void LocalGroup::run_own(int device) {
  if (device < 0) return;
  WithoutGil unlocked;
  eager::Runtime& rt = eager::Runtime::get();
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device));
    rt.fused(device).flush_groups();
  }
  rt.wait_group(device);
}

void LocalGroup::pull(int device) {
  eager::Runtime& rt = eager::Runtime::get();
  std::unique_lock<std::recursive_mutex> lock(rt.device_lock(device), std::try_to_lock);
  if (lock.owns_lock()) rt.fused(device).flush_groups();
}

void LocalGroup::run_program(int rank, std::unique_ptr<eager::Task> task, const std::string& signature) {
  for (const eager::Task::Arg& a : task->args)
    if (a.slot) a.slot->start_deferred();
  Program program{task.get(), task->key};
  if (program.key == ir::GraphKey{}) program.key = ir::graph_key(*task->graph, ir::GraphKey{});
  const std::chrono::milliseconds timeout(timeout_ms_.load());
  const std::string sig = "compiled program: " + signature;
  std::string error, apart;
  try {
    Entry e = Entry::of(sig, task->device, nullptr);
    e.kind = Entry::kProgram;
    e.program = &program;
    e.seq = issue(rank, sig, Mode::kCompiled, task->device, timeout);
    run_own(task->device);
    if (program_round(rank, std::move(e), timeout, &apart)) return;
    error = "tpu_dist: the compiled programs holding " + signature + " could not run together: " + apart +
            " (compiled functions holding collectives must be the same on every rank)";
  } catch (const std::exception& e) {
    error = e.what();
  }
  auto failure = std::make_shared<eager::DeviceError>(error, 0, task->sites);
  for (const eager::SlotPtr& o : task->outputs) o->fail(failure);
}

std::vector<std::string> LocalGroup::compiled_programs() { return detail::program_texts(); }

}  // namespace torchtpu::distributed
