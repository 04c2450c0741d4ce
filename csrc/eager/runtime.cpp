#include "eager/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "eager/capture.h"
#include "eager/fused_graph.h"
#include "eager/metrics.h"
#include "eager/op_graph.h"
#include "eager/site_log.h"
#include "eager/trace.h"

namespace torchtpu::eager {

namespace {
std::atomic<Runtime*> instance{nullptr};  // never deleted
std::mutex init_mu;
std::atomic<bool> forked_child{false};
std::atomic<bool (*)(uint64_t)> park_hook{nullptr};
thread_local int entry_depth = 0;

void mark_forked_child() { forked_child.store(true); }

std::string human_bytes(int64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = 0;
  for (; v >= 1024 && u < 5; ++u) v /= 1024;
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}
}  // namespace

EagerMode parse_mode(const std::string& name) {
  if (name == "debug") return EagerMode::kDebug;
  if (name == "strict") return EagerMode::kStrict;
  if (name == "fused") return EagerMode::kFused;
  throw std::invalid_argument("unknown eager mode '" + name + "': expected 'debug', 'strict' or 'fused'");
}

const char* mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::kDebug: return "debug";
    case EagerMode::kStrict: return "strict";
    case EagerMode::kFused: return "fused";
  }
  return "?";
}

StorageValue::StorageValue(int64_t nbytes, int device, uint64_t address) : device_(device) {
  block_.nbytes = nbytes;
  block_.address = address;
  Runtime::get().memory(device_).allocated(&block_);
}

StorageValue::~StorageValue() {
  // In a forked child the parent's locks may be held by threads that do not
  // exist there: the value is left alone.
  if (!Runtime::initialized() || forked_child) return;
  Runtime& rt = Runtime::get();
  rt.memory(device_).freed(&block_);
  if (pending_gen != 0 || param_gen != 0) {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(device_));
    Capture::forget(this);
    rt.fused(device_).forget(this);
  }
}

void StorageValue::set_slot(SlotPtr s, ir::DType dtype) {
  if (pending_gen != 0 || param_gen != 0) {
    Capture::forget(this);
    Runtime::get().fused(device_).forget(this);
  }
  slot_ = std::move(s);
  dtype_ = dtype;
}

pjrt::ElementType to_pjrt(ir::DType t) {
  using E = pjrt::ElementType;
  static constexpr E kByDType[] = {E::kPred, E::kU8,  E::kS8,  E::kS16, E::kS32, E::kS64,
                                   E::kF16,  E::kBF16, E::kF32, E::kF64, E::kU32, E::kU64,
                                   E::kC64,  E::kC128, E::kF8E4M3FN, E::kF8E5M2, E::kF8E4M3FNUZ, E::kF8E5M2FNUZ};
  static_assert(std::size(kByDType) == static_cast<size_t>(ir::DType::kF8E5M2FNUZ) + 1, "one per ir::DType, in order");
  return kByDType[static_cast<size_t>(t)];
}

void Runtime::init(const std::string& plugin_path, int64_t cpu_devices) {
  std::lock_guard<std::mutex> lock(init_mu);
  if (instance) return;
  std::unique_ptr<Runtime> r(new Runtime());
  const pjrt::Plugin& plugin = pjrt::Plugin::load(plugin_path);
  r->client_ = pjrt::Client::create(plugin, cpu_devices);
  ir::Hasher h;
  h.str(r->client_->platform_name().c_str());
  h.str(r->client_->platform_version().c_str());
  r->salt_ = h.key();
  const int n = r->client_->num_devices();
  r->memory_.reset(new MemoryLedger[n]);
  r->fraction_.reset(new std::atomic<double>[n]);
  for (int d = 0; d < n; ++d) {
    r->device_locks_.push_back(std::make_unique<std::recursive_mutex>());
    r->fused_.push_back(std::make_unique<FusedGraph>(d));
    r->fraction_[d] = 1.0;
    int64_t limit = r->client_->memory_limit(d);
    if (limit <= 0 && r->client_->platform_name() == "cpu") {
      limit = host_memory_bytes();
      r->shared_host_memory_ = true;
    }
    r->capacity_.push_back(std::max<int64_t>(limit, 0));
  }
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  r->compile_pool_ = std::make_unique<ThreadPool>(std::max(1, cores - 1));
  r->background_pool_ = std::make_unique<ThreadPool>(1);
  Runtime* raw = r.get();
  r->executor_ = std::make_unique<Executor>([raw](std::shared_ptr<const DeviceError> e) { raw->record_error(e); });
  r->copies_ = std::make_unique<CopyQueue>();
  for (int d = 0; d < n; ++d)
    r->groups_.push_back(std::make_unique<GroupQueue>([raw](std::unique_ptr<Task> t) { raw->queue(std::move(t)); }));
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { pthread_atfork(nullptr, nullptr, &mark_forked_child); });
  instance = r.release();
}

bool Runtime::initialized() { return instance != nullptr; }

Runtime& Runtime::get() {
  Runtime* rt = instance;
  if (!rt) throw std::runtime_error("torchtpu runtime is not initialized (import torchtpu first)");
  if (forked_child)
    throw std::runtime_error(
        "Cannot re-initialize torchtpu in forked subprocess. To use torchtpu with multiprocessing, you must use "
        "the 'spawn' start method");
  return *rt;
}

int Runtime::device_count() {
  Runtime* rt = instance;
  return rt ? rt->num_devices() : 0;
}

void Runtime::set_park_hook(bool (*may_park)(uint64_t)) { park_hook = may_park; }

namespace {
std::atomic<int> issuing_threads{0};
// Counts this thread among the issuing threads until it ends.
struct IssuingThread {
  IssuingThread() { issuing_threads.fetch_add(1); }
  ~IssuingThread() { issuing_threads.fetch_sub(1); }
};
thread_local bool noted_issuing = false;
}  // namespace

void Runtime::note_issuing_thread() {
  thread_local IssuingThread counted;
  noted_issuing = true;
}

void Runtime::park_if_closing() {
  Runtime* rt = instance;
  if (rt && rt->closing_ && rt->closer_ != thread_token()) rt->park_if_exiting();
}

void Runtime::shutdown() {
  if (forked_child) return;  // the parent's threads and locks are not here
  std::lock_guard<std::mutex> lock(init_mu);
  Runtime* rt = instance;
  if (!rt || rt->closing_) return;
  rt->closer_ = thread_token();
  rt->closing_ = true;
  // Other Python threads that issue ops get a bounded time to reach their
  // next op and be parked there: one still running Python code when the
  // interpreter finalizes may be ended by CPython from inside PyTorch's
  // tensor deallocation (a noexcept frame), which aborts the process.
  const int others = issuing_threads.load() - (noted_issuing ? 1 : 0);
  const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (rt->parked_.load() < others && std::chrono::steady_clock::now() < settle)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Threads inside the runtime finish what they are doing (an op, a sync
  // point); new ones are refused at the entry. Bounded: a thread may be
  // waiting on a long compile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rt->inside_ > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    rt->flush_fused();
    rt->copies_->stop();  // finishes queued uploads (programs may wait for them)
    rt->executor_->settle_all();
  } catch (const std::exception&) {
    // Errors of work nobody can read any more.
  }
  rt->executor_->stop();
  rt->compile_pool_->stop();
  rt->background_pool_->stop();  // what has not started is dropped (closing_)
}

Runtime::Entry::Entry(bool admit) {
  if (entry_depth++ > 0) return;
  try {
    Runtime& rt = Runtime::get();
    if (rt.closing_ && rt.closer_ != thread_token()) rt.park_if_exiting();
    if (admit) rt.executor_->admit();
    rt.inside_.fetch_add(1);
    rt_ = &rt;
    if (rt.closing_ && rt.closer_ != thread_token()) rt.park_if_exiting();
  } catch (...) {
    if (rt_) rt_->inside_.fetch_sub(1);
    --entry_depth;
    throw;
  }
}

Runtime::Entry::~Entry() {
  --entry_depth;
  if (rt_) rt_->inside_.fetch_sub(1);
}

void Runtime::park_if_exiting() {
  bool (*may_park)(uint64_t) = park_hook;
  if (!may_park || !may_park(closer_)) return;
  // The interpreter is exiting: this thread must not return into it (taking
  // the GIL there ends the thread from inside a destructor, which aborts the
  // process). It waits here until the process ends.
  if (noted_issuing) parked_.fetch_add(1);  // shutdown() waits for the Python threads that issue ops
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void Runtime::set_mode(EagerMode m) {
  // Under every device lock (in index order), so no op of another thread
  // lands in a fused graph after its flush.
  std::vector<std::unique_lock<std::recursive_mutex>> locks;
  for (auto& mu : device_locks_) locks.emplace_back(*mu);
  for (auto& f : fused_) f->flush(FusedGraph::Reason::kSync);
  mode_ = m;
}

pjrt::BufferPtr Runtime::wait_value(const SlotPtr& slot) {
  pjrt::BufferPtr buf;
  try {
    buf = slot->get();
  } catch (const DeviceError&) {
    mark_raised(slot->error());  // raised here, once
    throw;
  }
  if (const RunPtr& run = slot->run()) {
    if (std::shared_ptr<const DeviceError> e = executor_->outcome(*run)) {
      mark_raised(e);
      throw e->described();
    }
  }
  return buf;
}

void Runtime::submit(std::unique_ptr<Task> t) {
  for (const Task::Arg& a : t->args)
    if (a.slot) a.slot->start_deferred();  // queued first, so this task finds it filled
  if (!groups_[t->device]->take(t)) queue(std::move(t));
}

void Runtime::wait_groups() {
  for (auto& g : groups_) g->wait_idle();
}

void Runtime::queue(std::unique_ptr<Task> t) {
  try {
    // A compiled function's program comes with its executable and size.
    if (t->bytes == 0)
      for (ir::Value v : t->graph->outputs) {
        const ir::Type& ty = t->graph->type(v);
        t->bytes += ty.numel() * ir::byte_size(ty.dtype);
      }
    if (!t->ready_exe) {
      t->key = ir::graph_key(*t->graph, salt_);
      t->ready_exe = cache_.find(t->key);
    }
    if (!t->ready_exe) {
      auto promise = std::make_shared<std::promise<pjrt::ExecutablePtr>>();
      t->exe = promise->get_future().share();
      std::shared_ptr<const ir::Graph> graph = t->graph;
      OpSite site = t->sites.empty() ? OpSite{} : t->sites.front();
      const bool helper = t->helper;
      const int64_t bucket = t->bucket;
      compile_pool_->submit([this, graph, promise, site, helper, bucket] {
        try {
          bool hit = false;
          promise->set_value(executable_for(*graph, &hit, &site, helper, bucket));
        } catch (...) {
          promise->set_exception(std::current_exception());
        }
      });
    }
  } catch (const std::exception& e) {
    // Its outputs are installed already: they fail rather than wait forever.
    auto failure = std::make_shared<DeviceError>(std::string("could not queue the program: ") + e.what(), 0, t->sites);
    for (const SlotPtr& o : t->outputs) o->fail(failure);
    throw DeviceError(*failure);
  }
  const bool debug = mode_ == EagerMode::kDebug;
  RunPtr run = t->run;
  executor_->submit(std::move(t), /*may_run_here=*/debug);
  if (debug) {
    if (std::shared_ptr<const DeviceError> e = executor_->outcome(*run)) {
      mark_raised(e);
      throw DeviceError(*e);  // described by the op once it releases the device lock
    }
  }
}

void Runtime::flush_fused() {
  for (size_t d = 0; d < fused_.size(); ++d) {
    std::lock_guard<std::recursive_mutex> lock(*device_locks_[d]);
    fused_[d]->flush(FusedGraph::Reason::kSync);
    Capture::abandon_all(static_cast<int>(d), "a synchronization");
  }
}

pjrt::BufferPtr Runtime::device_value(StorageValue* s, const char* why) {
  OpGraph::check_not_batching(why);
  // The op that asked (.item()'s aten::_local_scalar_dense, .cpu()'s
  // aten::_copy_from, a data-dependent shape's op) and the user's line.
  const std::string host_read = "a host read of a device value";
  site_log().record(SiteLog::Kind::kSync, why == host_read ? last_op() : last_op() + (" (" + std::string(why) + ")"));
  Entry entry(/*admit=*/false);
  Capture::abandon_this_thread(why);
  SlotPtr slot;
  {
    std::lock_guard<std::recursive_mutex> lock(device_lock(s->device()));
    fused_[s->device()]->flush_for(s);
    Capture::abandon_holding(s, why);
    slot = s->slot();
  }
  Trace::Span span("sync point", "sync");
  span.detail(last_op());
  return slot ? wait_value(slot) : nullptr;
}

void Runtime::host_read(StorageValue* s, void* dst, int64_t nbytes) {
  pjrt::BufferPtr buf = device_value(s, "a host read of a device value");
  if (!buf) {
    std::memset(dst, 0, nbytes);
    return;
  }
  metrics().d2h_bytes += nbytes;
  Trace::Span span("device->host", "transfer");
  span.detail(std::to_string(nbytes) + " bytes");
  buf->to_host(dst, nbytes);
}

void Runtime::synchronize() {
  Entry entry(/*admit=*/false);
  flush_fused();
  wait_groups();
  copies_->drain();
  executor_->settle_all();
  raise_pending_error();
}

void Runtime::upload_async(const void* data, std::shared_ptr<void> keep, ir::DType dtype, const ir::Dims& dims,
                           int device, SlotPtr slot, OpSite site) {
  OpGraph::check_not_batching("a host-to-device copy");
  int64_t n = ir::byte_size(dtype);
  for (int64_t d : dims) n *= d;
  metrics().h2d_bytes += n;
  copies_->submit([this, data, keep = std::move(keep), dtype, dims, device, slot = std::move(slot), site, n] {
    try {
      Trace::Span span("host->device", "transfer");
      span.detail(std::to_string(n) + " bytes");
      slot->fill(client_->buffer_from_host(data, to_pjrt(dtype), dims, device), nullptr);
    } catch (const pjrt::Error& e) {
      auto err = std::make_shared<DeviceError>(std::string("host-to-device copy failed: ") + e.what(), e.code(),
                                               std::vector<OpSite>{site});
      slot->fail(err);
      record_error(err);
    } catch (const std::exception& e) {
      auto err = std::make_shared<DeviceError>(std::string("host-to-device copy failed: ") + e.what(), 0,
                                               std::vector<OpSite>{site});
      slot->fail(err);
      record_error(err);
    }
  });
}

std::shared_ptr<Marker> Runtime::record_marker(bool timing) {
  Entry entry(/*admit=*/false);
  auto m = std::make_shared<Marker>();
  if (!timing && mode_ == EagerMode::kFused && fused_pending()) {
    m->recorded_ns = steady_now_ns();
    m->copy = copies_->mark();
    m->deferred = true;
    return m;
  }
  flush_fused();
  wait_groups();  // programs after a collective are queued once it ran
  m->recorded_ns = steady_now_ns();
  m->copy = copies_->mark();
  m->run = executor_->last_run();
  if (m->run && m->run->finished() && !timing) m->run = nullptr;
  if (timing && m->run) Run::request_time(m->run);
  return m;
}

bool Runtime::fused_pending() {
  for (size_t d = 0; d < fused_.size(); ++d) {
    std::lock_guard<std::recursive_mutex> lock(*device_locks_[d]);
    if (fused_[d]->pending_ops() > 0) return true;
  }
  return false;
}

void Runtime::resolve_marker(Marker& m) {
  if (!m.deferred.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.deferred.load(std::memory_order_relaxed)) return;
  {
    Entry entry(/*admit=*/false);
    flush_fused();
    wait_groups();
  }
  m.run = executor_->last_run();
  m.deferred.store(false, std::memory_order_release);
}

bool Runtime::marker_done(Marker& m) {
  resolve_marker(m);
  return m.copy->done() && (!m.run || m.run->finished());
}

void Runtime::wait_marker(Marker& m) {
  resolve_marker(m);
  m.copy->wait();
  if (m.run) executor_->outcome(*m.run);  // errors surface at the next sync point
}

int64_t Runtime::marker_time(Marker& m) {
  wait_marker(m);
  int64_t t = std::max(m.copy->done_ns(), m.recorded_ns);
  if (m.run) {
    Run::request_time(m.run);  // stamps now if the marker was recorded without timing
    // The completion callback may trail the wait by a moment.
    while (m.run->done_ns() == 0) std::this_thread::yield();
    t = std::max(t, m.run->done_ns());
  }
  return t;
}

namespace {
// `s` converted to the integer type T as C++ converts (an integer wraps).
template <typename T>
T to_int(const HostScalar& s) {
  return s.integral ? static_cast<T>(s.i) : static_cast<T>(s.d);
}
template <typename T>
T to_float(const HostScalar& s) {
  return s.integral ? static_cast<T>(s.i) : static_cast<T>(s.d);
}
}  // namespace

int64_t Runtime::memory_capacity(int device) const {
  const int64_t o = capacity_override_;
  return o >= 0 ? o : capacity_.at(device);
}

int64_t Runtime::memory_held(int device) const {
  if (!shared_host_memory_) return memory_[device].bytes();
  int64_t sum = 0;
  for (int d = 0; d < num_devices(); ++d) sum += memory_[d].bytes();
  return sum;
}

void Runtime::set_memory_fraction(int device, double fraction) { fraction_[device] = fraction; }

std::string Runtime::allocation_failure(int64_t nbytes, int device) const {
  const int64_t cap = memory_capacity(device);
  if (cap <= 0 || nbytes <= 0) return "";
  // Every op's outputs pass here: the text is built only when they do not fit.
  auto what = [&] {
    return "tpu out of memory: tried to allocate " + human_bytes(nbytes) + " on tpu:" + std::to_string(device) + " (";
  };
  const double fraction = fraction_[device];
  if (fraction < 1.0) {
    const int64_t limit = static_cast<int64_t>(fraction * static_cast<double>(cap));
    const int64_t mine = memory_[device].bytes();
    if (nbytes > limit - mine)
      return what() + "per-process limit " + human_bytes(limit) + ", " + std::to_string(fraction) +
             " of capacity " + human_bytes(cap) + ", set by torch.tpu.set_per_process_memory_fraction; " +
             human_bytes(mine) + " held by live tpu tensors)";
  }
  const int64_t held = memory_held(device);
  if (nbytes <= cap - held) return "";
  return what() + "capacity " + human_bytes(cap) + (shared_host_memory_ ? ", the host's memory" : "") + "; " +
         human_bytes(held) + " held by live tpu tensors)";
}

pjrt::BufferPtr Runtime::scalar_buffer(ir::DType dtype, HostScalar s, int device) {
  uint64_t bits;
  if (s.integral) {
    std::memcpy(&bits, &s.i, 8);
  } else {
    std::memcpy(&bits, &s.d, 8);
  }
  const ScalarKey key{bits, s.integral, dtype, device};
  {
    std::lock_guard<std::mutex> lock(scalar_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  alignas(8) unsigned char buf[8] = {0};
  switch (dtype) {
    case ir::DType::kBool: buf[0] = s.integral ? s.i != 0 : s.d != 0; break;
    case ir::DType::kU8: buf[0] = to_int<uint8_t>(s); break;
    case ir::DType::kS8: { int8_t v = to_int<int8_t>(s); std::memcpy(buf, &v, 1); break; }
    case ir::DType::kS16: { int16_t v = to_int<int16_t>(s); std::memcpy(buf, &v, 2); break; }
    case ir::DType::kS32: { int32_t v = to_int<int32_t>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kS64: { int64_t v = to_int<int64_t>(s); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kU32: { uint32_t v = to_int<uint32_t>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kU64: { uint64_t v = s.integral ? static_cast<uint64_t>(s.i) : static_cast<uint64_t>(s.d); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kF32: { float v = to_float<float>(s); std::memcpy(buf, &v, 4); break; }
    case ir::DType::kF64: { double v = to_float<double>(s); std::memcpy(buf, &v, 8); break; }
    case ir::DType::kC64: case ir::DType::kC128:
      throw std::logic_error("scalar_buffer: complex scalars are passed as their real and imaginary parts");
    case ir::DType::kF16: case ir::DType::kBF16: case ir::DType::kF8E4M3FN: case ir::DType::kF8E5M2:
    case ir::DType::kF8E4M3FNUZ: case ir::DType::kF8E5M2FNUZ: {
      // Converted on the device from f32 to keep rounding XLA's.
      throw std::logic_error("scalar_buffer: 16- and 8-bit float scalars are passed as f32");
    }
  }
  pjrt::BufferPtr b = upload(buf, dtype, {}, device);
  std::lock_guard<std::mutex> lock(scalar_mu_);
  if (scalars_.size() > 4096) scalars_.clear();
  scalars_[key] = b;
  return b;
}

pjrt::BufferPtr Runtime::upload(const void* data, ir::DType dtype, const ir::Dims& dims, int device) {
  Entry entry(/*admit=*/false);
  int64_t n = ir::byte_size(dtype);
  for (int64_t d : dims) n *= d;
  metrics().h2d_bytes += n;
  Trace::Span span("host->device", "transfer");
  span.detail(std::to_string(n) + " bytes");
  return client_->buffer_from_host(data, to_pjrt(dtype), dims, device);
}

}  // namespace torchtpu::eager
