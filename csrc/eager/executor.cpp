#include "eager/executor.h"
#include "eager/trace.h"

#include <execinfo.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include "eager/copy_queue.h"
#include "eager/metrics.h"

namespace torchtpu::eager {

namespace {
SiteCaptureFn site_capture = nullptr;
SiteFormatFn site_format = nullptr;
std::atomic<bool> show_cpp{false};
thread_local const OpSite* current = nullptr;

std::string cpp_frames() {
  void* frames[48];
  int n = backtrace(frames, 48);
  char** names = backtrace_symbols(frames, n);
  std::string out = "\nC++ frames (executor):";
  for (int i = 0; i < n && names; ++i) out += std::string("\n  ") + names[i];
  std::free(names);
  return out;
}
}  // namespace

uint64_t thread_token() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

void set_cpp_stacktraces(bool on) { show_cpp = on; }
bool cpp_stacktraces() { return show_cpp; }

void set_site_hooks(SiteCaptureFn capture, SiteFormatFn format) {
  site_capture = capture;
  site_format = format;
}
SiteRef capture_site() {
  SiteRef s = site_capture ? site_capture() : SiteRef{};
  if (s.issuer == 0) s.issuer = thread_token();
  return s;
}
std::string format_site(SiteRef s, bool with_source) {
  return site_format && s.code ? site_format(s, with_source) : std::string();
}

const OpSite* current_op() { return current; }
CurrentOpScope::CurrentOpScope(const OpSite* op) : outer_(current) { current = op; }
void CurrentOpScope::end() {
  if (ended_) return;
  ended_ = true;
  current = outer_;
}

void Run::stamp() {
  int64_t zero = 0;
  done_ns_.compare_exchange_strong(zero, steady_now_ns(), std::memory_order_acq_rel);
}

void Run::executed(uint64_t seq, std::shared_ptr<pjrt::Event> done) {
  bool timed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq_ = seq;
    done_ = done;
    timed = time_requested_;
  }
  cv_.notify_all();
  if (timed) {
    if (!done) {
      stamp();
    } else if (auto self = self_.lock()) {
      try {
        done->on_ready([self](const std::string&) { self->stamp(); });
      } catch (const std::exception&) {
        stamp();
      }
    }
  }
}

void Run::settle(std::shared_ptr<const DeviceError> e) {
  bool timed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settled()) return;
    err_ = std::move(e);
    settled_.store(true, std::memory_order_release);
    timed = time_requested_;
  }
  if (timed) stamp();  // no-op when the completion callback came first
  cv_.notify_all();
}

void Run::request_time(const std::shared_ptr<Run>& run) {
  std::shared_ptr<pjrt::Event> done;
  {
    std::lock_guard<std::mutex> lock(run->mu_);
    if (run->time_requested_) return;
    run->time_requested_ = true;
    run->self_ = run;
    if (run->seq_ == 0 && !run->settled()) return;  // stamped once executed
    done = run->done_;
  }
  if (run->settled() || !done) {
    run->stamp();
    return;
  }
  try {
    done->on_ready([run](const std::string&) { run->stamp(); });
  } catch (const std::exception&) {
    run->stamp();
  }
}

bool Run::finished() {
  if (settled()) return true;
  std::shared_ptr<pjrt::Event> done = done_event();
  try {
    return done && done->is_ready();
  } catch (const std::exception&) {
    return true;  // failed: finished, with an error a sync point reports
  }
}

uint64_t Run::wait_executed() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return seq_ != 0 || settled(); });
  return seq_;
}

std::shared_ptr<pjrt::Event> Run::done_event() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

int DeviceError::status_code(int code, const std::string& what) {
  if (code == 8) return code;
  for (const char* sign : {"Out of memory", "out of memory", "RESOURCE_EXHAUSTED"})
    if (what.find(sign) != std::string::npos) return 8;
  return code;
}

DeviceError DeviceError::described() const {
  if (current) return *this;  // described by the op's OpGraph once it unlocks
  return DeviceError(sites_.empty() ? std::string(what()) : describe_failure(sites_, what()), code_);
}

std::string describe_failure(const std::vector<OpSite>& sites, const std::string& what) {
  std::ostringstream os;
  if (sites.size() == 1) {
    os << sites[0].op << ": " << what;
    std::string where = format_site(sites[0].where, /*with_source=*/true);
    if (!where.empty()) os << "\n  (issued at " << where << ")";
    return os.str();
  }
  os << "a fused graph of " << sites.size() << " ops failed: " << what;
  // The places its ops came from, the most recent first (usually the one
  // that matters), each with the ops issued there.
  std::vector<std::pair<std::string, std::vector<const char*>>> places;
  for (auto it = sites.rbegin(); it != sites.rend() && places.size() <= 8; ++it) {
    std::string where = format_site(it->where, /*with_source=*/true);
    auto place = std::find_if(places.begin(), places.end(), [&](const auto& p) { return p.first == where; });
    if (place == places.end()) {
      places.push_back({where, {}});
      place = places.end() - 1;
    }
    auto& ops = place->second;
    if (ops.size() < 12 && std::find_if(ops.begin(), ops.end(), [&](const char* o) {
          return std::string(o) == it->op;
        }) == ops.end())
      ops.push_back(it->op);
  }
  for (size_t i = 0; i < places.size() && i < 8; ++i) {
    os << (i == 0 ? "\n  its ops were issued at: " : "\n                          ")
       << (places[i].first.empty() ? "(unknown)" : places[i].first) << " (";
    for (size_t j = 0; j < places[i].second.size(); ++j) os << (j ? ", " : "") << places[i].second[j];
    os << ")";
  }
  return os.str();
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      queue_.push_back(std::move(fn));
      cv_.notify_one();
      return;
    }
  }
  fn();
}

void ThreadPool::loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

Executor::Executor(std::function<void(std::shared_ptr<const DeviceError>)> on_error)
    : on_error_(std::move(on_error)), thread_([this] { loop(); }) {}

Executor::~Executor() { stop(); }

void Executor::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  room_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Executor::set_limits(int64_t max_ops, int64_t max_bytes) {
  max_ops_ = std::max<int64_t>(1, max_ops);
  max_bytes_ = std::max<int64_t>(1, max_bytes);
  room_cv_.notify_all();
}

void Executor::submit(std::unique_ptr<Task> t, bool may_run_here) {
  pending_ops_.fetch_add(1, std::memory_order_relaxed);
  pending_bytes_.fetch_add(t->bytes, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mu_);
  last_run_ = t->run;
  if (exited_) {
    // After stop() (interpreter exit) callers run their tasks themselves,
    // one at a time.
    idle_cv_.wait(lock, [&] { return !inline_; });
  } else if (!may_run_here || stop_ || !queue_.empty() || busy_ || inline_ || !t->ready_exe) {
    queue_.push_back(std::move(t));
    if (sleeping_) cv_.notify_one();
    return;
  }
  // Debug Eager waits for every op anyway: with nothing queued or running
  // and the executable at hand, the caller runs it, saving two thread hops.
  run_here(std::move(t), lock);
}

void Executor::run_here(std::unique_ptr<Task> t, std::unique_lock<std::mutex>& lock) {
  inline_ = true;
  lock.unlock();
  run(*t);
  t.reset();
  lock.lock();
  inline_ = false;
  if (!queue_.empty()) cv_.notify_one();
  idle_cv_.notify_all();
}

void Executor::admit() {
  auto full = [&] {
    return pending_ops_.load(std::memory_order_relaxed) >= max_ops_ ||
           pending_bytes_.load(std::memory_order_relaxed) >= max_bytes_;
  };
  if (!full()) return;
  waiting_for_room_.fetch_add(1);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_ || !full()) break;
      bool executed;
      {
        std::lock_guard<std::mutex> events(events_mu_);
        executed = !in_flight_.empty();
      }
      if (!executed) {
        // Everything is still queued (compiling, or not yet handed over).
        room_cv_.wait_for(lock, std::chrono::milliseconds(20));
        continue;
      }
    }
    uint64_t oldest;
    {
      std::lock_guard<std::mutex> events(events_mu_);
      if (in_flight_.empty()) continue;
      oldest = in_flight_.front()->seq;
    }
    settle_through(oldest);
  }
  waiting_for_room_.fetch_sub(1);
}

void Executor::finished(int64_t bytes) {
  pending_ops_.fetch_sub(1, std::memory_order_relaxed);
  pending_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  if (waiting_for_room_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    room_cv_.notify_all();
  }
}

void Executor::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_ && !inline_; });
}

void Executor::settle(InFlight& f) {
  std::shared_ptr<const DeviceError> err;
  try {
    if (auto done = f.run->done_event()) done->wait();
  } catch (const pjrt::Error& e) {
    // Inputs ran earlier, so they are settled: a failed one is where the
    // error arose (PJRT passes it on to every program that reads it).
    for (const RunPtr& in : f.inputs)
      if (in->settled() && in->error()) {
        err = in->error();
        break;
      }
    if (!err) {
      err = std::make_shared<DeviceError>(std::string("device execution failed: ") + e.what(), e.code(),
                                          std::move(f.sites));
      on_error_(err);
    }
  }
  f.run->settle(std::move(err));
  f.exe.reset();
  finished(f.bytes);
}

void Executor::settle_through(uint64_t seq) {
  std::lock_guard<std::mutex> settling(settle_mu_);
  for (;;) {
    std::unique_ptr<InFlight> f;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      if (in_flight_.empty() || in_flight_.front()->seq > seq) return;
      f = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    settle(*f);
  }
}

void Executor::settle_ready() {
  std::unique_lock<std::mutex> settling(settle_mu_, std::try_to_lock);
  if (!settling.owns_lock()) return;
  for (;;) {
    std::unique_ptr<InFlight> f;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      if (in_flight_.empty()) return;
      bool ready = true;
      try {
        auto done = in_flight_.front()->run->done_event();
        ready = !done || done->is_ready();
      } catch (const pjrt::Error&) {
      }
      if (!ready) return;
      f = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    settle(*f);
  }
}

void Executor::settle_all() {
  drain();
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    last = seq_;
  }
  settle_through(last);
}

std::shared_ptr<const DeviceError> Executor::outcome(Run& r) {
  const uint64_t seq = r.wait_executed();
  if (r.settled()) return r.error();
  try {
    if (auto done = r.done_event()) done->wait();
    settle_ready();
    return nullptr;
  } catch (const pjrt::Error&) {
  }
  settle_through(seq);
  return r.error();
}

void Executor::loop() {
  for (;;) {
    std::unique_ptr<Task> t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty() || inline_) {
        busy_ = false;
        idle_cv_.notify_all();
        sleeping_ = true;
        // Stops only with the queue empty; a queued task waits for an
        // inline one to finish.
        cv_.wait(lock, [&] { return (!queue_.empty() && !inline_) || (stop_ && queue_.empty()); });
        sleeping_ = false;
        if (queue_.empty()) {
          exited_ = true;
          idle_cv_.notify_all();
          return;
        }
      }
      t = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    run(*t);
    t.reset();
    settle_ready();
  }
}

void Executor::run(Task& t) {
  std::shared_ptr<const DeviceError> failure;
  // An argument may still be an upload on the copy queue: wait for it.
  for (const Task::Arg& a : t.args)
    if (a.slot) a.slot->wait();
  // A task that reads the value of a failed one fails the same way (the
  // error was recorded once already).
  for (const Task::Arg& a : t.args)
    if (a.slot && a.slot->error()) {
      for (const SlotPtr& o : t.outputs) o->fail(a.slot->error());
      t.run->settle(a.slot->error());
      finished(t.bytes);
      return;
    }
  pjrt::ExecuteResult r;
  int64_t launched = 0;  // steady ns of the launch, when spans are wanted
  pjrt::ExecutablePtr exe;
  auto in_flight = std::make_unique<InFlight>();
  try {
    exe = t.ready_exe ? t.ready_exe : t.exe.get();
    std::vector<pjrt::Buffer*> args;
    args.reserve(t.args.size());
    for (const Task::Arg& a : t.args) {
      args.push_back(a.slot ? a.slot->buffer().get() : a.scalar.get());
      if (a.slot && a.slot->run() && !a.slot->run()->settled()) in_flight->inputs.push_back(a.slot->run());
    }
    // A donation the program was compiled for happens only when nothing but
    // this task holds the value; otherwise PJRT copies.
    std::vector<int64_t> donatable;
    for (const auto& d : t.graph->donations) {
      const SlotPtr& s = t.args[d.first].slot;
      if (s && s.use_count() == 1 && s->buffer().use_count() == 1) donatable.push_back(d.first);
    }
    {
      Trace::Span span("execute", "execute");
      span.detail(std::to_string(t.sites.size()) + " ops" + (t.sites.empty() ? "" : ", first " + std::string(t.sites[0].op)));
      launched = Trace::wanted() ? steady_now_ns() : 0;
      r = exe->execute(args, t.device, donatable);
    }
    metrics().executions.fetch_add(1, std::memory_order_relaxed);
    metrics().donated_buffers.fetch_add(static_cast<int64_t>(donatable.size()), std::memory_order_relaxed);
    for (int64_t i : donatable) t.args[i].slot->release();
    if (r.outputs.size() != t.outputs.size())
      throw std::logic_error("the program returned " + std::to_string(r.outputs.size()) + " outputs, expected " +
                             std::to_string(t.outputs.size()));
  } catch (const DeviceError& e) {
    failure = std::make_shared<DeviceError>(e.what(), e.code(), t.sites);
  } catch (const pjrt::Error& e) {
    failure = std::make_shared<DeviceError>(e.what(), e.code(), t.sites);
  } catch (const std::exception& e) {
    failure = std::make_shared<DeviceError>(e.what(), 0, t.sites);
  }
  if (failure) {
    if (show_cpp)
      failure = std::make_shared<DeviceError>(failure->what() + cpp_frames(), failure->code(), t.sites);
    on_error_(failure);  // before waking readers, which mark it delivered once raised
    for (const SlotPtr& o : t.outputs) o->fail(failure);
    t.run->settle(failure);
    finished(t.bytes);
    return;
  }
  for (size_t i = 0; i < t.outputs.size(); ++i) t.outputs[i]->fill(std::move(r.outputs[i]), t.run);
  in_flight->run = t.run;
  in_flight->exe = std::move(exe);
  in_flight->sites = std::move(t.sites);
  in_flight->bytes = t.bytes;
  std::lock_guard<std::mutex> lock(events_mu_);
  in_flight->seq = ++seq_;
  if (launched && r.done) {
    // The program's time on the device: from its launch to its completion event.
    std::string what =
        std::to_string(t.sites.size()) + " ops" + (t.sites.empty() ? "" : ", first " + std::string(t.sites[0].op));
    try {
      r.done->on_ready([launched, what](const std::string&) {
        Trace::add_finished("device execution", "device", launched, steady_now_ns(), what);
      });
    } catch (const std::exception&) {  // no span
    }
  }
  t.run->executed(in_flight->seq, std::move(r.done));
  in_flight_.push_back(std::move(in_flight));
}

}  // namespace torchtpu::eager
