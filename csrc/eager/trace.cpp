#include "eager/trace.h"

#include <chrono>
#include <cstring>

#include "eager/slot.h"

namespace torchtpu::eager {

namespace {
std::mutex mu;
std::vector<Trace::Event>* events = new std::vector<Trace::Event>;  // never destroyed: threads trace at exit
int64_t dropped_events = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::atomic<bool> Trace::on_{false};
Trace::ProfilerBegin Trace::profiler_begin_ = nullptr;
Trace::ProfilerEnd Trace::profiler_end_ = nullptr;
Trace::ProfilerOn Trace::profiler_on_ = nullptr;
Trace::ProfilerFinished Trace::profiler_finished_ = nullptr;

void Trace::set_profiler_hooks(ProfilerBegin begin, ProfilerEnd end, ProfilerOn on, ProfilerFinished finished) {
  profiler_end_ = end;
  profiler_on_ = on;
  profiler_finished_ = finished;
  profiler_begin_ = begin;
}

void Trace::add_finished(const char* name, const char* cat, int64_t begin_ns, int64_t end_ns, std::string detail) {
  if (profiler_on_ && profiler_on_()) profiler_finished_(name, begin_ns, end_ns);
  if (on()) add(Event{name, cat, kDeviceRow, begin_ns, end_ns, std::move(detail)});
}

void Trace::start() {
  std::lock_guard<std::mutex> lock(mu);
  events->clear();
  dropped_events = 0;
  on_.store(true);
}

std::vector<Trace::Event> Trace::stop(int64_t* dropped) {
  on_.store(false);
  std::lock_guard<std::mutex> lock(mu);
  std::vector<Event> out;
  out.swap(*events);
  if (dropped) *dropped = dropped_events;
  return out;
}

void Trace::add(Event e) {
  std::lock_guard<std::mutex> lock(mu);
  if (events->size() >= kMaxEvents) {
    ++dropped_events;
    return;
  }
  events->push_back(std::move(e));
}

Trace::Span::Span(const char* name, const char* cat) : name_(name), cat_(cat) {
  if (on()) begin_ns_ = now_ns();
  // An op's own span is the dispatcher's in torch.profiler already.
  if (profiler_begin_ && std::strcmp(cat, "op") != 0) profiled_ = profiler_begin_(name);
}

Trace::Span::~Span() {
  if (profiled_) profiler_end_(profiled_);
  if (begin_ns_ && on()) add(Event{name_, cat_, thread_token(), begin_ns_, now_ns(), std::move(detail_)});
}

}  // namespace torchtpu::eager
