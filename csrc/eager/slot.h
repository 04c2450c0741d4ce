// A device value that a queued task produces, and the errors such a task can
// raise. The Python thread creates a Slot when it queues the op that computes
// it; the executor fills it (or fails it) when the op has run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"

namespace torchtpu::eager {

// A small number naming the calling thread (never reused), so an error of
// queued work goes to the thread that issued it.
uint64_t thread_token();
// The issuer of an op whose thread is not known (a backward op whose forward
// op was not found): it joins the fused graph of its inputs, and its errors
// go to any thread's synchronize().
constexpr uint64_t kAnyIssuer = ~uint64_t{0};

// Where an op was issued: the op's name, an opaque reference to the user's
// source position (resolved to text only when an error is reported), and the
// thread the error belongs to (for a backward op, the thread that issued its
// forward op).
struct SiteRef {
  const void* code = nullptr;  // owned by the site provider (kept alive there)
  int lasti = -1;
  uint64_t issuer = 0;
  // Strict Eager: a hash of the user frames that called `code` (0 when not
  // taken), telling apart one line reached from different callers (one
  // layer class's line in layers of different sizes) for bucketing.
  uint64_t callers = 0;
};
struct OpSite {
  const char* op = "";
  SiteRef where;
};

// Installed by the Python layer: capture the current user frame, and format a
// captured one ("train.py:42 in step"). Without them sites are op names only.
// capture_site() always names an issuer (this thread when the hook does not).
using SiteCaptureFn = SiteRef (*)();
using SiteFormatFn = std::string (*)(SiteRef, bool with_source);
void set_site_hooks(SiteCaptureFn capture, SiteFormatFn format);
SiteRef capture_site();
// with_source: followed by the line's text (`c = a + b`), for errors.
std::string format_site(SiteRef s, bool with_source = false);

// The op whose graph this thread is building (set by OpGraph while it holds
// the device lock), or null. An op built inside another takes the outer
// op's source position; and since resolving a site takes the GIL, which no
// thread may wait for while holding a device lock, an error raised inside
// an op is described only once the op's OpGraph has released the lock.
const OpSite* current_op();
class CurrentOpScope {
 public:
  explicit CurrentOpScope(const OpSite* op);
  ~CurrentOpScope() { end(); }
  void end();  // restores the outer op early
  CurrentOpScope(const CurrentOpScope&) = delete;
  CurrentOpScope& operator=(const CurrentOpScope&) = delete;

 private:
  const OpSite* outer_;
  bool ended_ = false;
};

// With C++ stack traces on, errors of queued work carry the executor's
// frames (TORCHTPU_SHOW_CPP_STACKTRACES).
void set_cpp_stacktraces(bool on);
bool cpp_stacktraces();

// An error from queued work, raised at a sync point. `code` is the PJRT
// (absl) status code, 0 when the error did not come from PJRT; an
// out-of-memory that a plugin reports with another code (XLA:CPU's
// execution events say "Compute error: ... Out of memory") gets code 8,
// RESOURCE_EXHAUSTED.
// The executor records the failing ops' sites; described() turns them into
// text on the raising thread (resolving a site takes the GIL, which the
// executor thread must never wait for).
class DeviceError : public std::runtime_error {
 public:
  DeviceError(const std::string& what, int code, std::vector<OpSite> sites = {})
      : std::runtime_error(what), code_(status_code(code, what)), sites_(std::move(sites)) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }
  const std::vector<OpSite>& sites() const { return sites_; }
  // The error with its message naming the ops and their source lines (the
  // error itself while this thread builds an op: see current_op()).
  DeviceError described() const;

 private:
  static int status_code(int code, const std::string& what);
  int code_;
  std::vector<OpSite> sites_;
};

// What became of one queued program. Queued, then executed (handed to the
// device; its completion event is known), then settled: finished, or failed
// with an error. Shared by the program's output slots, so a reader can learn
// whether the value it read was computed.
class Run {
 public:
  void executed(uint64_t seq, std::shared_ptr<pjrt::Event> done);
  // The first call decides; `e` null means success.
  void settle(std::shared_ptr<const DeviceError> e);
  bool settled() const { return settled_.load(std::memory_order_acquire); }
  // Only after settled(): the error (null on success).
  const std::shared_ptr<const DeviceError>& error() const { return err_; }
  // Waits until executed or settled; returns the execution's order number
  // (0 when it settled without executing).
  uint64_t wait_executed();
  // Null until executed.
  std::shared_ptr<pjrt::Event> done_event();
  // Asks for the time the program finishes (events with timing): from the
  // completion event once executed; now, if it already settled.
  static void request_time(const std::shared_ptr<Run>& run);
  // Steady-clock nanoseconds when it finished; 0 until known.
  int64_t done_ns() const { return done_ns_.load(std::memory_order_acquire); }
  // Whether the device has finished it (settled, or its event is ready).
  bool finished();

 private:
  void stamp();  // done_ns_ = now, once
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t seq_ = 0;
  std::shared_ptr<pjrt::Event> done_;
  bool time_requested_ = false;
  std::atomic<int64_t> done_ns_{0};
  std::weak_ptr<Run> self_;  // set by request_time, for the completion callback
  std::atomic<bool> settled_{false};
  std::shared_ptr<const DeviceError> err_;
};
using RunPtr = std::shared_ptr<Run>;

// One value: empty until the op that computes it has run.
class Slot {
 public:
  static std::shared_ptr<Slot> ready(pjrt::BufferPtr b);
  // The program `run` produced `b`; the device may still be computing it.
  void fill(pjrt::BufferPtr b, RunPtr run);
  void fail(std::shared_ptr<const DeviceError> e);
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits until the slot is filled; throws the DeviceError of a failed op.
  pjrt::BufferPtr get();
  // Waits until the slot is filled (by a program, or an upload on the copy
  // queue), without raising.
  void wait();
  // Only after done(): the buffer (null if failed).
  const pjrt::BufferPtr& buffer() const { return buf_; }
  // Only after done(): the error known so far (the program did not run, or
  // its run settled with an error), else null.
  std::shared_ptr<const DeviceError> error() const;
  // Only after done(): the program that produced the value (null for an
  // upload or a failure before it ran).
  const RunPtr& run() const { return run_; }
  // Drops the buffer once it was donated to a program.
  void release() { buf_.reset(); }

  // A bucketed program's output (buckets.h) keeps its padded value beside
  // the exact one, so a later bucketed program that reads it padded alike
  // skips the pad. `layout` names the padded layout (and the true size).
  struct Twin {
    std::shared_ptr<Slot> padded;
    uint64_t layout = 0;
    // With exactly one varying factor: the elements per unit of it (4 * 64
    // for [4, n, 64]); else 0.
    int64_t fixed = 0;
  };
  void set_twin(std::shared_ptr<const Twin> t);
  std::shared_ptr<const Twin> twin();

  // A small upload keeps its host bytes (a private copy), so a bucketed
  // program pads it on the host instead of compiling a pad program per size.
  struct HostCopy {
    std::shared_ptr<void> keep;
    const void* data = nullptr;
    int64_t nbytes = 0;
  };
  void set_host(std::shared_ptr<const HostCopy> h);
  std::shared_ptr<const HostCopy> host();

  // Work that fills the slot only once something reads it (a bucketed
  // program's output cut back to its exact size: a value that only later
  // bucketed programs read, through its twin, is never cut back). Shared by
  // the slots one such program fills; the first start() queues it.
  class Deferred {
   public:
    explicit Deferred(std::function<void()> start) : start_(std::move(start)) {}
    void start();

   private:
    std::mutex mu_;
    std::function<void()> start_;
  };
  void defer(std::shared_ptr<Deferred> d);
  // Queues the deferred work, if any. Every path that hands a task to the
  // device calls it for the task's arguments (Runtime::submit), and
  // get()/wait() call it, so no reader waits for work never queued.
  void start_deferred();

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  pjrt::BufferPtr buf_;
  std::shared_ptr<const Twin> twin_;
  std::shared_ptr<const HostCopy> host_;
  std::shared_ptr<Deferred> deferred_;
  std::atomic<bool> has_deferred_{false};
  RunPtr run_;
  std::shared_ptr<const DeviceError> err_;
};
using SlotPtr = std::shared_ptr<Slot>;

}  // namespace torchtpu::eager
