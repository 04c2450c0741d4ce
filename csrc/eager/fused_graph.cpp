#include "eager/fused_graph.h"

#include <atomic>
#include <stdexcept>

#include "eager/metrics.h"
#include "ir/graph_key.h"

namespace torchtpu::eager {

namespace {
std::atomic<uint64_t> next_gen{1};
std::atomic<int64_t> max_ops{2000};
}  // namespace

void set_fused_max_ops(int64_t n) { max_ops = n < 1 ? 1 : n; }
int64_t fused_max_ops() { return max_ops; }

FusedGraph::FusedGraph(int device) : device_(device), gen_(next_gen++), loop_(max_ops) {}

void FusedGraph::reset() {
  gen_ = next_gen++;
  g_ = ir::Graph();
  args_.clear();
  arg_free_.clear();
  written_.clear();
  sites_.clear();
  ops_ = 0;
}

void FusedGraph::forget(StorageValue* s) {
  if (s->pending_gen == gen_) written_[s->pending_index] = nullptr;
  if (s->param_gen == gen_) arg_free_[s->param_index] = true;
  s->pending_gen = 0;
  s->param_gen = 0;
}

void FusedGraph::append(ir::Graph& op, const std::vector<OpGraph::Input>& inputs,
                        const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  const ir::GraphKey fp = ir::graph_key(op, ir::GraphKey{});
  std::vector<ir::Node>& nodes = op.mutable_nodes();
  // Where each node of the op's graph lands: parameters resolve to pending
  // values or parameters of this graph; other nodes are moved over.
  std::vector<ir::Value> where(nodes.size());
  std::vector<bool> is_param(nodes.size(), false);
  for (const OpGraph::Input& in : inputs) {
    const int32_t i = in.param.node;
    is_param[i] = true;
    const ir::Type& t = nodes[i].results[0];
    StorageValue* s = in.storage;
    if (!s) {
      where[i] = g_.parameter(t);
      args_.push_back({nullptr, in.scalar});
      arg_free_.push_back(false);
    } else if (s->pending_gen == gen_) {
      if (g_.type(s->pending_value) != t) throw std::logic_error("fused graph: pending value type mismatch");
      where[i] = s->pending_value;
    } else if (s->param_gen == gen_) {
      where[i] = s->param_value;
    } else {
      where[i] = g_.parameter(t);
      s->param_gen = gen_;
      s->param_value = where[i];
      s->param_index = static_cast<int32_t>(args_.size());
      args_.push_back({s->slot(), nullptr});
      arg_free_.push_back(false);
    }
  }
  auto map = [&](ir::Value v) { return is_param[v.node] ? where[v.node] : ir::Value{where[v.node].node, v.index}; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (is_param[i]) continue;
    ir::Node& n = nodes[i];
    for (ir::Value& v : n.operands) v = map(v);
    where[i] = g_.append(std::move(n));
  }
  for (const OpGraph::Output& o : outputs) {
    StorageValue* s = o.storage;
    if (s->param_gen == gen_) arg_free_[s->param_index] = true;  // its old value is dead
    if (s->pending_gen != gen_) {
      s->pending_gen = gen_;
      s->pending_index = static_cast<int32_t>(written_.size());
      written_.push_back(s);
    }
    s->pending_value = map(o.flat);
    s->set_pending_dtype(o.dtype);
  }
  sites_.push_back(site);
  ++ops_;
  loop_.set_max_ops(max_ops);
  switch (loop_.record(fp.hi ^ fp.lo, ops_)) {
    case LoopDetector::Cut::kNone: break;
    case LoopDetector::Cut::kLoop: flush(Reason::kLoop); break;
    case LoopDetector::Cut::kSize: flush(Reason::kSize); break;
  }
}

void FusedGraph::flush(Reason why) {
  if (ops_ == 0) return;
  Metrics& m = metrics();
  m.fused_graphs.fetch_add(1, std::memory_order_relaxed);
  m.fused_ops.fetch_add(ops_, std::memory_order_relaxed);
  (why == Reason::kSync ? m.cuts_sync : why == Reason::kLoop ? m.cuts_loop : m.cuts_size)
      .fetch_add(1, std::memory_order_relaxed);
  std::vector<StorageValue*> outs;
  for (StorageValue* s : written_)
    if (s && s->pending_gen == gen_) {
      g_.outputs.push_back(s->pending_value);
      outs.push_back(s);
    }
  m.fused_outputs.fetch_add(static_cast<int64_t>(outs.size()), std::memory_order_relaxed);
  if (outs.empty()) {  // every value it computed is dead
    reset();
    return;
  }
  // A parameter whose storage died or was overwritten is donated to the
  // first output of its type not yet aliased.
  std::vector<bool> aliased(outs.size(), false);
  for (size_t i = 0; i < args_.size(); ++i) {
    if (!args_[i].slot || !arg_free_[i]) continue;
    const ir::Type& t = g_.parameter_type(static_cast<int>(i));
    for (size_t j = 0; j < outs.size(); ++j)
      if (!aliased[j] && g_.type(g_.outputs[j]) == t) {
        aliased[j] = true;
        g_.donations.push_back({static_cast<int>(i), static_cast<int>(j)});
        break;
      }
  }
  auto task = std::make_unique<Task>();
  task->device = device_;
  task->args = std::move(args_);
  task->sites = std::move(sites_);
  task->outputs.reserve(outs.size());
  for (StorageValue* s : outs) {
    auto slot = std::make_shared<Slot>();
    s->pending_gen = 0;
    s->param_gen = 0;
    s->set_slot(slot, s->dtype());
    task->outputs.push_back(std::move(slot));
  }
  task->graph = std::make_shared<const ir::Graph>(std::move(g_));
  reset();
  Runtime::get().submit(std::move(task));
}

}  // namespace torchtpu::eager
