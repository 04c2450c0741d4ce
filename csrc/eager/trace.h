// Trace: the spans of torchtpu's work for a timeline
// (torchtpu.debug.trace("trace.json"), a Chrome trace that Perfetto opens):
// op dispatch, graph cache lookup and compilation, program launch, the
// wait of a sync point, and host<->device copies, each on the thread that
// did it. Off unless started; a Span then costs one relaxed atomic load.
// Bounded: at most kMaxEvents spans are kept (later ones are counted as
// dropped). While torch.profiler records, each span is also a span of its
// trace (the profiler hooks the Python layer installs).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace torchtpu::eager {

class Trace {
 public:
  static constexpr size_t kMaxEvents = 1 << 20;
  static constexpr uint64_t kDeviceRow = ~uint64_t{0} - 1;  // the thread of add_finished's spans
  struct Event {
    const char* name;  // static or interned strings only
    const char* cat;
    uint64_t thread;
    int64_t begin_ns, end_ns;
    std::string detail;
  };
  static bool on() { return on_.load(std::memory_order_relaxed); }
  static void start();
  // Stops and hands over the spans recorded since start() and how many were dropped.
  static std::vector<Event> stop(int64_t* dropped);
  static void add(Event e);

  // Installed by the Python layer: begin opens a span named `name` in
  // torch.profiler's trace while it records and returns its handle (null:
  // not recording); end closes it, on the same thread.
  using ProfilerBegin = void* (*)(const char* name);
  using ProfilerEnd = void (*)(void* handle);
  // on: whether torch.profiler records; finished: a span that ran
  // elsewhere (the device), from begin_ns to end_ns on the steady clock.
  using ProfilerOn = bool (*)();
  using ProfilerFinished = void (*)(const char* name, int64_t begin_ns, int64_t end_ns);
  static void set_profiler_hooks(ProfilerBegin begin, ProfilerEnd end, ProfilerOn on, ProfilerFinished finished);
  // Whether spans are wanted now: a trace is on, or torch.profiler records.
  static bool wanted() { return on() || (profiler_on_ && profiler_on_()); }
  // A span that ran elsewhere (a program on the device, from its launch to
  // its completion event), for the trace and torch.profiler.
  static void add_finished(const char* name, const char* cat, int64_t begin_ns, int64_t end_ns, std::string detail);

  // One span, from construction to destruction (if tracing was on at construction).
  class Span {
   public:
    Span(const char* name, const char* cat);
    ~Span();
    void detail(std::string d) {
      if (begin_ns_) detail_ = std::move(d);
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    const char* name_;
    const char* cat_;
    int64_t begin_ns_ = 0;
    void* profiled_ = nullptr;  // the torch.profiler span, if any
    std::string detail_;
  };

 private:
  static std::atomic<bool> on_;
  static ProfilerBegin profiler_begin_;
  static ProfilerEnd profiler_end_;
  static ProfilerOn profiler_on_;
  static ProfilerFinished profiler_finished_;
};

}  // namespace torchtpu::eager
