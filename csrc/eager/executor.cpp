#include "eager/executor.h"

#include <execinfo.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

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

void set_cpp_stacktraces(bool on) { show_cpp = on; }
bool cpp_stacktraces() { return show_cpp; }

void set_site_hooks(SiteCaptureFn capture, SiteFormatFn format) {
  site_capture = capture;
  site_format = format;
}
SiteRef capture_site() { return site_capture ? site_capture() : SiteRef{}; }
std::string format_site(SiteRef s) { return site_format && s.code ? site_format(s) : std::string(); }

const OpSite* current_op() { return current; }
CurrentOpScope::CurrentOpScope(const OpSite* op) : outer_(current) { current = op; }
void CurrentOpScope::end() {
  if (ended_) return;
  ended_ = true;
  current = outer_;
}

SlotPtr Slot::ready(pjrt::BufferPtr b) {
  auto s = std::make_shared<Slot>();
  s->buf_ = std::move(b);
  s->done_.store(true, std::memory_order_release);
  return s;
}

void Slot::fill(pjrt::BufferPtr b) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    buf_ = std::move(b);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Slot::fail(std::shared_ptr<const DeviceError> e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    err_ = std::move(e);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

pjrt::BufferPtr Slot::get() {
  if (!done()) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done(); });
  }
  if (err_) throw err_->described();
  return buf_;
}

DeviceError DeviceError::described() const {
  if (current) return *this;  // described by the op's OpGraph once it unlocks
  return DeviceError(sites_.empty() ? std::string(what()) : describe_failure(sites_, what()), code_);
}

std::string describe_failure(const std::vector<OpSite>& sites, const std::string& what) {
  std::ostringstream os;
  if (sites.size() == 1) {
    os << sites[0].op << ": " << what;
    std::string where = format_site(sites[0].where);
    if (!where.empty()) os << "\n  (issued at " << where << ")";
    return os.str();
  }
  os << "a fused graph of " << sites.size() << " ops failed: " << what;
  // The distinct places its ops came from, last first (the most recent is
  // usually the one that matters).
  std::set<std::string> seen;
  int shown = 0;
  for (auto it = sites.rbegin(); it != sites.rend() && shown < 8; ++it) {
    std::string where = format_site(it->where);
    std::string line = std::string(it->op) + (where.empty() ? "" : " at " + where);
    if (!seen.insert(line).second) continue;
    os << (shown == 0 ? "\n  its ops were issued by: " : "\n                          ") << line;
    ++shown;
  }
  return os.str();
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
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
  if (thread_.joinable()) thread_.join();
}

void Executor::submit(std::unique_ptr<Task> t, bool may_run_here) {
  std::unique_lock<std::mutex> lock(mu_);
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

void Executor::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_ && !inline_; });
}

void Executor::check(InFlight& f) {
  if (!f.done) return;
  try {
    f.done->wait();
  } catch (const pjrt::Error& err) {
    if (!f.checked.exchange(true))
      on_error_(std::make_shared<DeviceError>(std::string("device execution failed: ") + err.what(), err.code()));
  }
}

void Executor::wait_device() {
  drain();
  std::vector<std::shared_ptr<InFlight>> waiting;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    waiting = in_flight_;  // another thread may wait for the same ones
  }
  for (auto& f : waiting) check(*f);
  std::lock_guard<std::mutex> lock(events_mu_);
  std::set<const InFlight*> done;
  for (auto& f : waiting) done.insert(f.get());
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [&](const std::shared_ptr<InFlight>& f) { return done.count(f.get()) != 0; }),
                   in_flight_.end());
}

void Executor::track(std::shared_ptr<pjrt::Event> done, pjrt::ExecutablePtr exe) {
  auto f = std::make_shared<InFlight>();
  f->done = std::move(done);
  f->exe = std::move(exe);
  std::lock_guard<std::mutex> lock(events_mu_);
  if (in_flight_.size() >= 256) {
    // Finished executions leave the list; their errors are reported first.
    std::vector<std::shared_ptr<InFlight>> keep;
    for (auto& e : in_flight_) {
      bool ready = true;
      try {
        ready = e->done->is_ready();
      } catch (const pjrt::Error&) {
      }
      if (ready) {
        check(*e);
      } else {
        keep.push_back(std::move(e));
      }
    }
    in_flight_.swap(keep);
  }
  in_flight_.push_back(std::move(f));
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
  }
}

void Executor::run(Task& t) {
  std::shared_ptr<const DeviceError> failure;
  // A task that reads the value of a failed one fails the same way (the
  // error was reported once already).
  for (const Task::Arg& a : t.args)
    if (a.slot && a.slot->error()) {
      for (const SlotPtr& o : t.outputs) o->fail(a.slot->error());
      return;
    }
  pjrt::ExecuteResult r;
  pjrt::ExecutablePtr exe;
  try {
    exe = t.ready_exe ? t.ready_exe : t.exe.get();
    std::vector<pjrt::Buffer*> args;
    args.reserve(t.args.size());
    for (const Task::Arg& a : t.args) args.push_back(a.slot ? a.slot->buffer().get() : a.scalar.get());
    // A donation the program was compiled for happens only when nothing but
    // this task holds the value; otherwise PJRT copies.
    std::vector<int64_t> donatable;
    for (const auto& d : t.graph->donations) {
      const SlotPtr& s = t.args[d.first].slot;
      if (s && s.use_count() == 1 && s->buffer().use_count() == 1) donatable.push_back(d.first);
    }
    r = exe->execute(args, t.device, donatable);
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
    on_error_(failure);  // before waking readers, which clear it once raised
    for (const SlotPtr& o : t.outputs) o->fail(failure);
    return;
  }
  for (size_t i = 0; i < t.outputs.size(); ++i) t.outputs[i]->fill(std::move(r.outputs[i]));
  track(std::move(r.done), std::move(exe));
}

}  // namespace torchtpu::eager
