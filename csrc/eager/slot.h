// A device value that a queued task produces, and the errors such a task can
// raise. The Python thread creates a Slot when it queues the op that computes
// it; the executor fills it (or fails it) when the op has run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"

namespace torchtpu::eager {

// Where an op was issued: the op's name and an opaque reference to the user's
// source position, resolved to text only when an error is reported.
struct SiteRef {
  const void* code = nullptr;  // owned by the site provider (kept alive there)
  int lasti = -1;
};
struct OpSite {
  const char* op = "";
  SiteRef where;
};

// Installed by the Python layer: capture the current user frame, and format a
// captured one ("train.py:42 in step"). Without them sites are op names only.
using SiteCaptureFn = SiteRef (*)();
using SiteFormatFn = std::string (*)(SiteRef);
void set_site_hooks(SiteCaptureFn capture, SiteFormatFn format);
SiteRef capture_site();
std::string format_site(SiteRef s);

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
// (absl) status code, 0 when the error did not come from PJRT.
// The executor records the failing ops' sites; described() turns them into
// text on the raising thread (resolving a site takes the GIL, which the
// executor thread must never wait for).
class DeviceError : public std::runtime_error {
 public:
  DeviceError(const std::string& what, int code, std::vector<OpSite> sites = {})
      : std::runtime_error(what), code_(code), sites_(std::move(sites)) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }
  // The error with its message naming the ops and their source lines (the
  // error itself while this thread builds an op: see current_op()).
  DeviceError described() const;

 private:
  int code_;
  std::vector<OpSite> sites_;
};

// One value: empty until the op that computes it has run.
class Slot {
 public:
  static std::shared_ptr<Slot> ready(pjrt::BufferPtr b);
  void fill(pjrt::BufferPtr b);
  void fail(std::shared_ptr<const DeviceError> e);
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits until the slot is filled; throws the DeviceError of a failed op.
  pjrt::BufferPtr get();
  // Only after done(): the buffer (null if failed) and the error.
  const pjrt::BufferPtr& buffer() const { return buf_; }
  const std::shared_ptr<const DeviceError>& error() const { return err_; }
  // Drops the buffer once it was donated to a program.
  void release() { buf_.reset(); }

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  pjrt::BufferPtr buf_;
  std::shared_ptr<const DeviceError> err_;
};
using SlotPtr = std::shared_ptr<Slot>;

}  // namespace torchtpu::eager
