#include "eager/fused_graph.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "eager/buckets.h"
#include "eager/copy_queue.h"
#include "eager/metrics.h"
#include "eager/trace.h"
#include "ir/graph_key.h"

namespace torchtpu::eager {

namespace {
std::atomic<uint64_t> next_gen{1};
std::atomic<int64_t> max_ops{2000};
std::atomic<bool> replay_on{true};
}  // namespace

void set_fused_replay(bool on) { replay_on = on; }
bool fused_replay() { return replay_on.load(std::memory_order_relaxed); }

void set_fused_max_ops(int64_t n) { max_ops = n < 1 ? 1 : n; }
int64_t fused_max_ops() { return max_ops; }

FusedGraph::Pending::Pending(uint64_t issuer) : issuer(issuer), gen(next_gen++), loop(max_ops) {}

void FusedGraph::Pending::reset() {
  gen = next_gen++;
  g = ir::Graph();
  args.clear();
  arg_free.clear();
  arg_storage.clear();
  arg_redraw.clear();
  written.clear();
  sites.clear();
  calls.clear();
  ops = 0;
  replay.reset();
  journal.steps.clear();
  journal.binds.clear();
  journal.outs.clear();
  journaled = true;
}

FusedGraph::Pending* FusedGraph::owner(const StorageValue* s) const {
  if (s->pending_gen == 0 && s->param_gen == 0) return nullptr;
  for (const auto& p : pending_)
    if (s->pending_gen == p->gen || s->param_gen == p->gen) return p.get();
  return nullptr;
}

FusedGraph::Pending& FusedGraph::for_issuer(uint64_t issuer) {
  for (const auto& p : pending_)
    if (p->issuer == issuer) return *p;
  // Empty graphs of other threads (finished ones, most likely) go first.
  if (pending_.size() >= 8)
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const std::unique_ptr<Pending>& p) { return p->ops == 0; }),
                   pending_.end());
  pending_.push_back(std::make_unique<Pending>(issuer));
  return *pending_.back();
}

int64_t FusedGraph::pending_ops() const {
  int64_t n = 0;
  for (const auto& p : pending_) n += p->ops;
  return n;
}

void FusedGraph::forget(StorageValue* s) {
  Pending* p = owner(s);
  if (p) {
    if (s->pending_gen == p->gen) p->written[s->pending_index] = nullptr;
    if (s->param_gen == p->gen) {
      p->arg_free[s->param_index] = true;
      p->arg_storage[s->param_index] = nullptr;
    }
  }
  // A capture clears only its own marks (the device's graph may hold the
  // storage too); the device's graph clears stale ones as well.
  if (!capture_ || (p && s->pending_gen == p->gen)) s->pending_gen = 0;
  if (!capture_ || (p && s->param_gen == p->gen)) s->param_gen = 0;
}

namespace {
// An op's fingerprint for the loop detector (in-process only): its kernel
// (the name's address), its node count, the last node's op and the types of
// what it reads and writes. Equal structure gives equal fingerprints; ops
// that differ only in attributes may share one, which moves a cut, never a
// result (each cut graph is keyed in full).
uint64_t fingerprint(const ir::Graph& op, const std::vector<OpGraph::Input>& inputs,
                     const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  ir::Hasher h;
  const std::vector<ir::Node>& nodes = op.nodes();
  h.u64(reinterpret_cast<uintptr_t>(site.op));
  h.u64(nodes.size());
  if (!nodes.empty()) h.u64(reinterpret_cast<uintptr_t>(nodes.back().op));
  auto type = [&](const ir::Type& t) {
    h.u64(static_cast<uint64_t>(t.dtype) | (t.dims.size() << 8));
    for (int64_t d : t.dims) h.u64(static_cast<uint64_t>(d));
  };
  for (const OpGraph::Input& in : inputs) type(op.type(in.param));
  for (const OpGraph::Output& o : outputs) type(op.type(o.flat));
  const ir::GraphKey k = h.key();
  return k.hi ^ k.lo;
}
}  // namespace

FusedGraph::Pending& FusedGraph::join(const std::vector<OpGraph::Input>& inputs,
                                      const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  Pending* own = capture_ ? &for_issuer(0) : nullptr;
  if (!own && site.where.issuer == kAnyIssuer) {
    for (const OpGraph::Input& in : inputs)
      if (in.storage && (own = owner(in.storage))) break;
  }
  if (!own) own = &for_issuer(site.where.issuer);
  auto settle_other = [&](StorageValue* s) {
    Pending* q = owner(s);
    if (q && q != own) flush(*q, Reason::kSync);
  };
  for (const OpGraph::Input& in : inputs)
    if (in.storage) settle_other(in.storage);
  // A capture reads values pending in the device's own graph once queued.
  if (capture_)
    for (const OpGraph::Input& in : inputs)
      if (in.storage && in.storage->pending_gen != 0 && !owner(in.storage))
        Runtime::get().fused(device_).flush_for(in.storage);
  for (const OpGraph::Output& o : outputs) settle_other(o.storage);
  return *own;
}

void FusedGraph::append(ir::Graph& op, const std::vector<OpGraph::Input>& inputs,
                        const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  append_op(&op, op, nullptr, inputs, outputs, site);
}

void FusedGraph::append_shared(const ir::Graph& op, const ir::GraphKey& key,
                               const std::vector<OpGraph::Input>& inputs,
                               const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  append_op(nullptr, op, &key, inputs, outputs, site);
}

void FusedGraph::append_op(ir::Graph* owned, const ir::Graph& op, const ir::GraphKey* key,
                           const std::vector<OpGraph::Input>& inputs, const std::vector<OpGraph::Output>& outputs,
                           const OpSite& site) {
  Pending& p = join(inputs, outputs, site);
  const bool replayable = !capture_ && op.collectives.empty() && fused_replay();
  ir::GraphKey k;
  if (replayable) {
    k = key ? *key : ir::graph_key(op, ir::GraphKey{});
    if (replay_op(p, k, inputs, outputs, site)) return;
  } else if (p.replay) {
    stop_replay(p, &site, fused_replay() ? "an op holding collectives" : "replay was switched off");
  }
  const bool journal = replayable && p.journaled;
  if (!replayable) p.journaled = false;

  const uint64_t fp = fingerprint(op, inputs, outputs, site);
  const std::vector<ir::Node>& nodes = op.nodes();
  // Where each node of the op's graph lands: parameters resolve to pending
  // values or parameters of this graph; other nodes are moved (or copied)
  // over.
  std::vector<ir::Value> where(nodes.size());
  std::vector<bool> is_param(nodes.size(), false);
  for (const OpGraph::Input& in : inputs) {
    const int32_t i = in.param.node;
    is_param[i] = true;
    const ir::Type& t = nodes[i].results[0];
    StorageValue* s = in.storage;
    From from;
    if (!s) {
      from = From::kScalar;
      where[i] = p.g.parameter(t);
      p.args.push_back({nullptr, in.scalar});
      p.arg_free.push_back(false);
      p.arg_storage.push_back(nullptr);
      p.arg_redraw.push_back(in.redraw);
    } else if (s->pending_gen == p.gen) {
      if (p.g.type(s->pending_value) != t) throw std::logic_error("fused graph: pending value type mismatch");
      from = From::kPending;
      where[i] = s->pending_value;
    } else if (s->param_gen == p.gen) {
      from = From::kParam;
      where[i] = s->param_value;
    } else {
      from = From::kNewParam;
      where[i] = p.g.parameter(t);
      s->param_gen = p.gen;
      s->param_value = where[i];
      s->param_index = static_cast<int32_t>(p.args.size());
      p.args.push_back({s->slot(), nullptr});
      p.arg_free.push_back(false);
      p.arg_storage.push_back(s);
      p.arg_redraw.push_back({});
    }
    if (journal) p.journal.binds.push_back({from, i, where[i]});
  }
  auto map = [&](ir::Value v) { return is_param[v.node] ? where[v.node] : ir::Value{where[v.node].node, v.index}; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (is_param[i]) continue;
    ir::Node n = owned ? std::move(owned->mutable_nodes()[i]) : nodes[i];
    for (ir::Value& v : n.operands) v = map(v);
    where[i] = p.g.append(std::move(n));
  }
  for (int32_t c : op.collectives) p.g.collectives.push_back(where[c].node);
  for (const OpGraph::Output& o : outputs) {
    StorageValue* s = o.storage;
    if (s->param_gen == p.gen && !capture_) p.arg_free[s->param_index] = true;  // its old value is dead
    if (s->pending_gen != p.gen) {
      s->pending_gen = p.gen;
      s->pending_index = static_cast<int32_t>(p.written.size());
      p.written.push_back(s);
    }
    s->pending_value = map(o.flat);
    s->set_pending_dtype(o.dtype);
    if (journal) p.journal.outs.push_back({s->pending_value, o.dtype});
  }
  p.sites.push_back(site);
  p.sites.back().where.issuer = p.issuer;
  ++p.ops;
  if (journal)
    p.journal.steps.push_back({k, site.op, fp, static_cast<int32_t>(p.g.nodes().size()),
                               static_cast<int32_t>(p.journal.binds.size()),
                               static_cast<int32_t>(p.journal.outs.size())});
  if (capture_) return;
  after_append(p, fp, !op.collectives.empty());
}

void FusedGraph::after_append(Pending& p, uint64_t fp, bool collectives) {
  if (!p.calls.empty()) last_op_ns_.store(steady_now_ns(), std::memory_order_relaxed);  // ranks only
  p.loop.set_max_ops(max_ops);
  const LoopDetector::Cut cut = p.loop.record(fp, p.ops);
  // No cut right after a collective: its group joins the graph first (join_group).
  if (collectives) return;
  switch (cut) {
    case LoopDetector::Cut::kNone: break;
    case LoopDetector::Cut::kLoop: flush(p, Reason::kLoop); break;
    case LoopDetector::Cut::kSize: flush(p, Reason::kSize); break;
  }
}

void FusedGraph::flush(Reason why) {
  for (const auto& p : pending_) flush(*p, why);
}

void FusedGraph::flush_issuer(uint64_t issuer) {
  for (const auto& p : pending_)
    if (issuer == kAnyIssuer || p->issuer == issuer) flush(*p, Reason::kSync);
}

void FusedGraph::flush_for(const StorageValue* s) {
  if (s->pending_gen == 0) return;
  for (const auto& p : pending_)
    if (p->gen == s->pending_gen) return flush(*p, Reason::kSync);
}

void FusedGraph::flush(Pending& p, Reason why) {
  if (std::unique_ptr<Task> task = make_task(p, why))
    for (std::unique_ptr<Task>& t : buckets().apply(std::move(task))) Runtime::get().submit(std::move(t));
}

void FusedGraph::join_group(const StorageValue* result, CollectiveCall call) {
  Pending* p = owner(result);
  if (!p || p->g.collectives.size() != p->calls.size() + 1)
    throw std::logic_error("fused graph: a collective joined no pending graph");
  call.node = p->g.collectives.back();
  p->calls.push_back(std::move(call));
  last_op_ns_.store(steady_now_ns(), std::memory_order_relaxed);
}

int64_t FusedGraph::idle_ns() const { return steady_now_ns() - last_op_ns_.load(std::memory_order_relaxed); }

void FusedGraph::flush_groups() {
  for (const auto& p : pending_)
    if (!p->calls.empty()) flush(*p, Reason::kSync);
}

std::unique_ptr<Task> FusedGraph::make_task(Pending& p, Reason why) {
  if (p.ops == 0) return nullptr;
  Trace::Span span("fused graph cut", "fused");
  span.detail(std::to_string(p.ops) + " ops, at " +
              (why == Reason::kSync ? "a sync point" : why == Reason::kLoop ? "a loop boundary" : "the size limit"));
  Metrics& m = metrics();
  m.fused_graphs.fetch_add(1, std::memory_order_relaxed);
  m.fused_ops.fetch_add(p.ops, std::memory_order_relaxed);
  (why == Reason::kSync ? m.cuts_sync : why == Reason::kLoop ? m.cuts_loop : m.cuts_size)
      .fetch_add(1, std::memory_order_relaxed);
  std::vector<StorageValue*> outs;
  std::vector<int32_t> out_at;  // their places in p.written
  for (size_t i = 0; i < p.written.size(); ++i) {
    StorageValue* s = p.written[i];
    if (s && s->pending_gen == p.gen) {
      outs.push_back(s);
      out_at.push_back(static_cast<int32_t>(i));
    }
  }
  m.fused_outputs.fetch_add(static_cast<int64_t>(outs.size()), std::memory_order_relaxed);
  if (outs.empty() && p.calls.empty()) {  // every value it computed is dead
    p.reset();
    return nullptr;
  }
  auto task = std::make_unique<Task>();
  std::shared_ptr<const Recording> replayed;
  if (p.replay) {
    if ((replayed = fitting(p, out_at))) {
      task->graph = replayed->graph;
      task->key = replayed->key;
      task->ready_exe = Runtime::get().cache().find(replayed->key);
      // The most recently used first.
      auto it = std::find(p.recordings.begin(), p.recordings.end(), replayed);
      if (it != p.recordings.end()) std::rotate(p.recordings.begin(), it, it + 1);
    } else {
      stop_replay(p, nullptr, static_cast<size_t>(p.ops) != p.replay->steps.size()
                                  ? "the graph was cut before the recorded cut"
                                  : "other values it wrote are alive at the cut, or other inputs died");
    }
  }
  if (!replayed) {
    for (StorageValue* s : outs) p.g.outputs.push_back(s->pending_value);
    // A parameter whose storage died or was overwritten is donated to the
    // first output of its type not yet aliased.
    std::vector<bool> aliased(outs.size(), false);
    for (size_t i = 0; i < p.args.size(); ++i) {
      if (!p.args[i].slot || !p.arg_free[i]) continue;
      const ir::Type& t = p.g.parameter_type(static_cast<int>(i));
      for (size_t j = 0; j < outs.size(); ++j)
        if (!aliased[j] && p.g.type(p.g.outputs[j]) == t) {
          aliased[j] = true;
          p.g.donations.push_back({static_cast<int>(i), static_cast<int>(j)});
          break;
        }
    }
  }
  task->device = device_;
  task->args = std::move(p.args);
  task->sites = std::move(p.sites);
  task->collectives = std::move(p.calls);
  task->outputs.reserve(outs.size());
  for (StorageValue* s : outs) {
    auto slot = std::make_shared<Slot>();
    s->pending_gen = 0;
    s->param_gen = 0;
    s->set_slot(slot, s->dtype());
    task->outputs.push_back(std::move(slot));
  }
  if (replayed) {
    if (p.last) p.last->next = replayed;
    p.last = replayed;
    p.reset();
    return task;
  }
  if (outs.empty()) {  // its collectives' results are dead, but the other ranks need them to run
    p.g.outputs.push_back(ir::Value{task->collectives.front().node, 0});
    task->outputs.push_back(std::make_shared<Slot>());
  }
  auto graph = std::make_shared<const ir::Graph>(std::move(p.g));
  task->graph = graph;
  if (!capture_ && p.journaled && task->collectives.empty()) keep_recording(p, std::move(out_at), graph, *task);
  p.reset();
  return task;
}

FusedGraph::Taken FusedGraph::take() {
  Taken t;
  for (const auto& pp : pending_) {
    Pending& p = *pp;
    if (p.ops == 0) continue;
    if (p.replay) stop_replay(p, nullptr, "a capture takes the graph");
    if (t.ops != 0) throw std::logic_error("fused graph: a capture holds more than one pending graph");
    for (StorageValue* s : p.written)
      if (s && s->pending_gen == p.gen) t.written.push_back(s);
    t.graph = std::move(p.g);
    t.args = std::move(p.args);
    t.arg_storage = std::move(p.arg_storage);
    t.arg_redraw = std::move(p.arg_redraw);
    t.sites = std::move(p.sites);
    t.ops = p.ops;
    // The storages leave the graph: their values are the caller's to set.
    for (StorageValue* s : t.written) s->pending_gen = 0;
    for (StorageValue* s : t.arg_storage)
      if (s && s->param_gen == p.gen) s->param_gen = 0;
    p.reset();
  }
  return t;
}

}  // namespace torchtpu::eager
