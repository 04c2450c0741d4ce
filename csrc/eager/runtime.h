// The device runtime: one PJRT client, the compile cache, the eager mode, the
// executor that runs queued programs, the pending Fused Eager graph of each
// device, and the storage values that device tensors hold. Torch-free; the
// aten layer maps tensors onto StorageValue.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/executable_cache.h"
#include "eager/copy_queue.h"
#include "eager/eager_mode.h"
#include "eager/executor.h"
#include "eager/group_queue.h"
#include "eager/memory.h"
#include "ir/graph.h"
#include "pjrt/pjrt.h"

namespace torchtpu::eager {

class FusedGraph;

// What one device storage holds: a flat 1-D value of `numel(dtype)`
// elements: a Slot (filled by a queued program or an upload), a pending value
// in the device's fused graph, or nothing yet (reads as zeros). Values are
// immutable; a write swaps in a new one, so every alias sees it. All members
// but the size are guarded by the device lock (Runtime::device_lock). Its
// bytes count as held on the device while it lives.
class StorageValue {
 public:
  // `address`: the fake address the allocator handed out (memory snapshots list it).
  StorageValue(int64_t nbytes, int device, uint64_t address = 0);
  ~StorageValue();  // leaves the fused graph, so a dead value gets no output
  StorageValue(const StorageValue&) = delete;
  StorageValue& operator=(const StorageValue&) = delete;

  int64_t nbytes() const { return block_.nbytes; }
  int device() const { return device_; }
  int64_t numel(ir::DType dtype) const { return block_.nbytes / ir::byte_size(dtype); }

  bool has_value() const { return slot_ || pending_gen != 0; }
  ir::DType dtype() const { return dtype_; }
  const SlotPtr& slot() const { return slot_; }
  void set_slot(SlotPtr s, ir::DType dtype);
  // An uploaded buffer becomes the value.
  void set_buffer(pjrt::BufferPtr b, ir::DType dtype) { set_slot(Slot::ready(std::move(b)), dtype); }

  // Fused Eager bookkeeping, owned by FusedGraph (valid while the generation
  // matches the graph's).
  uint64_t pending_gen = 0;  // the value is `pending_value` of that graph
  ir::Value pending_value;
  int32_t pending_index = -1;  // in the graph's written list
  uint64_t param_gen = 0;      // slot_ is parameter `param_value` of that graph
  ir::Value param_value;
  int32_t param_index = -1;
  void set_pending_dtype(ir::DType d) { dtype_ = d; }

 private:
  LiveBlock block_;  // in the device's MemoryLedger while alive
  int device_;
  ir::DType dtype_ = ir::DType::kF32;
  SlotPtr slot_;
};

pjrt::ElementType to_pjrt(ir::DType t);

// A point in the device's work, as an event records it: the last program
// handed to the compute queue (the executor) and a mark in the copy queue.
// Done when both are; its time is when the later of the two finished.
// Recorded while Fused Eager work is pending (and without timing), a marker
// does not cut the pending program: it is `deferred`, and takes its run when
// first asked (query, wait, time), which queues the pending work then. The
// run it takes may hold work issued after the recording, so it is done no
// earlier than the work before it.
struct Marker {
  RunPtr run;  // null: no program was queued
  std::shared_ptr<CopyMark> copy;
  int64_t recorded_ns = 0;
  std::atomic<bool> deferred{false};
  std::mutex mu;  // guards taking the run of a deferred marker
};

// A host scalar as the user gave it: an integer keeps all 64 bits (a double
// holds only 53), a float is a double.
struct HostScalar {
  bool integral = false;
  int64_t i = 0;  // integral: the value (a uint64 above 2**63 as its bits)
  double d = 0;
  static HostScalar of_int(int64_t v) { return {true, v, static_cast<double>(v)}; }
  static HostScalar of_float(double v) { return {false, 0, v}; }
};

// The process's device runtime. Created once and never destroyed (threads
// that outlive interpreter exit may still hold it). In a child forked after
// it was created, get() raises at once: the parent's client and threads do
// not exist there.
class Runtime {
 public:
  // Loads the plugin and creates the client; idempotent for the same args.
  static void init(const std::string& plugin_path, int64_t cpu_devices);
  static bool initialized();
  // Raises std::runtime_error in a forked child.
  static Runtime& get();
  // Devices of the client, 0 before init; never raises.
  static int device_count();
  // At interpreter exit: stops accepting work from other threads, waits a
  // bounded time for threads inside the runtime, finishes queued work, and
  // joins the executor and compile threads.
  static void shutdown();

  // Entering the runtime from a user thread, for an op (admit: may wait for
  // room in the queue) or a sync point. Raises in a forked child. After
  // shutdown() a thread other than the one that shut down is parked for
  // good if the park hook says it must not return to the exiting
  // interpreter; others (the exiting thread, one holding the GIL) run their
  // work on the spot. Nested entries are free.
  class Entry {
   public:
    explicit Entry(bool admit);
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    Runtime* rt_ = nullptr;
  };
  // Whether a thread entering after shutdown may be parked, given the
  // thread that shut down (installed by the Python layer).
  static void set_park_hook(bool (*may_park)(uint64_t exiting_thread));
  // A Python thread issues ops (called once per thread by the Python layer;
  // the count drops when the thread ends). shutdown() gives such threads a
  // bounded time to reach the runtime and be parked before the interpreter
  // finalizes, so none is still running Python code when it does.
  static void note_issuing_thread();
  // Freeing a storage after shutdown: parks the thread as an entry would
  // (a thread freeing a tensor has released the GIL and would take it back
  // in the finalizing interpreter).
  static void park_if_closing();

  pjrt::Client& client() { return *client_; }
  int num_devices() const { return client_->num_devices(); }
  const std::string& platform() const { return client_->platform_name(); }

  EagerMode mode() const { return mode_; }
  // Materializes pending fused work before switching.
  void set_mode(EagerMode m);

  cache::ExecutableCache& cache() { return cache_; }
  int64_t compilations() const { return compilations_; }
  void reset_compilations() { compilations_ = 0; }
  const ir::GraphKey& salt() const { return salt_; }

  // Compile cache (compile.cpp). Compiles or fetches the executable for a
  // graph (its outputs set).
  // `site` (the graph's first op) is where a compilation is attributed
  // (recompiles.h); a `helper` (a bucketed program's pad or unpad) is only
  // counted; `bucket`: the bucket a bucketed program serves.
  // `counted`: the caller counted and attributed the compilation already.
  pjrt::ExecutablePtr executable_for(const ir::Graph& g, bool* hit, const OpSite* site = nullptr,
                                     bool helper = false, int64_t bucket = 0, bool counted = false);
  // Compiles `g` (whose key the cache does not hold) on a background
  // thread of its own, so that work already queued never waits for it.
  // Counted and attributed now, so compile counts do not depend on timing.
  // `done` runs on that thread with null or the compilation's error (or
  // an error when shutdown() drops it unstarted).
  void compile_in_background(std::shared_ptr<const ir::Graph> g, const OpSite* site, int64_t bucket,
                             std::function<void(std::exception_ptr)> done);
  // Compiles StableHLO module text as given (no cache), with the options
  // every graph compiles with.
  pjrt::ExecutablePtr compile_text(const std::string& text);
  // Compiles StableHLO module text for one replica per device of
  // `device_ids` (no cache): Executable::execute_replicated runs it.
  pjrt::ExecutablePtr compile_replicated(const std::string& text, const std::vector<int64_t>& device_ids);
  // Turns on the disk tiers (an empty directory leaves that tier off), each
  // capped at max_bytes. `identity` names the plugin and torchtpu builds and
  // the machine; with the platform and compile options it makes the
  // fingerprint the entry directories are named by, which is returned.
  // `shared_key` signs and verifies the shared tier's entries; without one
  // that tier stays off.
  std::string configure_cache(const std::string& local_dir, const std::string& shared_dir, int64_t max_bytes,
                              const std::string& identity, const std::string& shared_key = "");

  // Serializes graph building on a device (the autograd thread and the
  // Python thread both issue ops). Recursive: kernels nest.
  std::recursive_mutex& device_lock(int device) { return *device_locks_[device]; }
  FusedGraph& fused(int device) { return *fused_[device]; }

  // Queues a program: the executable is taken from memory or compiled by the
  // pool, and the executor runs it in order. In Debug mode, waits for it and
  // raises its error. A program holding collectives, and the device's
  // programs after it, go through the device's GroupQueue first.
  void submit(std::unique_ptr<Task> t);
  // Queues a program on the executor at once (the GroupQueue's way on).
  void queue(std::unique_ptr<Task> t);
  // Waits until no device's GroupQueue holds a program (or that device's).
  void wait_groups();
  void wait_group(int device) { groups_[device]->wait_idle(); }
  // The queue's bound: programs, and bytes of their outputs, queued or
  // running (Executor::admit).
  void set_queue_limits(int64_t max_ops, int64_t max_bytes) { executor_->set_limits(max_ops, max_bytes); }
  Executor& executor() { return *executor_; }

  // Sync points. host_read flushes pending work the storage depends on,
  // waits for its value and copies it to `dst`, raising the error of the
  // work that computed it; synchronize waits for all work and raises the
  // first error not yet raised of work this thread issued. An error is
  // raised once (DeviceError); errors of other threads' work are theirs.
  void host_read(StorageValue* s, void* dst, int64_t nbytes);
  // The computed buffer of a storage's value (its pending work flushed and
  // waited for, raising its error); null when it holds none (zeros). `why`
  // names the sync point to a capture it abandons.
  pjrt::BufferPtr device_value(StorageValue* s, const char* why);
  void synchronize();
  // Waits until every queued program has been handed to the device (not
  // finished; pending fused work stays pending).
  void drain() { executor_->drain(); }
  // Materializes every device's pending fused graph (queues it).
  void flush_fused();
  // Raises (and forgets) the first error of this thread's queued work not
  // raised yet.
  void raise_pending_error();
  // Every error of queued work not raised yet, of any thread, described (and
  // forgotten): what the process reports at exit.
  std::vector<std::string> unobserved_errors();
  // Waits until a value is computed and returns it; raises the error of the
  // work that computed it.
  pjrt::BufferPtr wait_value(const SlotPtr& slot);

  // Device memory: the bytes a device can hold (PJRT's limit, else the
  // host's memory for XLA:CPU, whose devices share it; 0: unknown) and the
  // bytes live storages hold (of all devices when they share the host's
  // memory). allocation_failure says why `nbytes` more do not fit (the
  // capacity, or the device's per-process limit), or returns "" when they do.
  int64_t memory_capacity(int device) const;
  int64_t memory_held(int device) const;
  std::string allocation_failure(int64_t nbytes, int device) const;
  // The storages of one device.
  MemoryLedger& memory(int device) { return memory_[device]; }
  // A per-process limit on one device's storages, as a fraction of its
  // capacity (torch.tpu.set_per_process_memory_fraction); 1 or more: none.
  void set_memory_fraction(int device, double fraction);
  double memory_fraction(int device) const { return fraction_[device]; }
  // Overrides the capacity of every device (tests); 0 turns the check off, -1 restores.
  void set_memory_capacity(int64_t bytes) { capacity_override_ = bytes; }

  // Non-blocking uploads (copy_queue.h): `slot` gets the buffer of `dims`
  // elements at `data`, or fails with the error (also raised at the issuing
  // thread's next sync point, naming `site`); `keep` holds the host memory
  // until the copy is done.
  void upload_async(const void* data, std::shared_ptr<void> keep, ir::DType dtype, const ir::Dims& dims,
                    int device, SlotPtr slot, OpSite site);
  // Events: records the current position of both queues. Pending Fused
  // work is queued first only with `timing` (the completion time is then
  // taken from the device's completion event); otherwise the marker is
  // deferred (see Marker) and queries and waits are the sync points.
  std::shared_ptr<Marker> record_marker(bool timing);
  bool marker_done(Marker& m);
  void wait_marker(Marker& m);
  // Waits for the marker; steady-clock nanoseconds when its work finished.
  int64_t marker_time(Marker& m);
  // A deferred marker takes its run: pending Fused work is queued.
  void resolve_marker(Marker& m);
  // Whether a Fused graph of any device holds ops not yet queued.
  bool fused_pending();
  int64_t async_uploads() const { return copies_ ? copies_->copies() : 0; }

  // A 0-d device buffer holding `value` (recently used values are kept).
  pjrt::BufferPtr scalar_buffer(ir::DType dtype, HostScalar value, int device);
  pjrt::BufferPtr upload(const void* data, ir::DType dtype, const ir::Dims& dims, int device);
  // The error was raised (or reported inside another error that is): no
  // thread's synchronize() raises it again, and the exit report leaves it out.
  void mark_raised(const std::shared_ptr<const DeviceError>& e);

 private:
  Runtime() = default;
  void record_error(std::shared_ptr<const DeviceError> e);
  void park_if_exiting();
  std::unique_ptr<pjrt::Client> client_;
  std::atomic<EagerMode> mode_{EagerMode::kStrict};
  cache::ExecutableCache cache_;
  std::atomic<int64_t> compilations_{0};
  ir::GraphKey salt_;

  std::vector<std::unique_ptr<std::recursive_mutex>> device_locks_;
  std::vector<std::unique_ptr<FusedGraph>> fused_;
  std::vector<std::unique_ptr<GroupQueue>> groups_;
  std::unique_ptr<ThreadPool> compile_pool_;
  std::unique_ptr<ThreadPool> background_pool_;  // compile_in_background
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<CopyQueue> copies_;

  // Errors of queued work not raised yet, by issuing thread (a program
  // whose ops came from several threads is listed under each).
  std::mutex error_mu_;
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<const DeviceError>>> unraised_;

  std::vector<int64_t> capacity_;  // per device; 0 unknown
  bool shared_host_memory_ = false;
  std::unique_ptr<MemoryLedger[]> memory_;
  std::unique_ptr<std::atomic<double>[]> fraction_;
  std::atomic<int64_t> capacity_override_{-1};

  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> closer_{0};
  std::atomic<int> inside_{0};  // threads between Entry and its end
  std::atomic<int> parked_{0};  // threads parked for good after shutdown

  struct ScalarKey {
    uint64_t bits;
    bool integral;
    ir::DType dtype;
    int device;
    bool operator==(const ScalarKey& o) const {
      return bits == o.bits && integral == o.integral && dtype == o.dtype && device == o.device;
    }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const {
      return static_cast<size_t>(k.bits * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(k.dtype) << 56) ^
                                 (static_cast<uint64_t>(k.device) << 48) ^ (static_cast<uint64_t>(k.integral) << 47));
    }
  };
  std::mutex scalar_mu_;
  std::unordered_map<ScalarKey, pjrt::BufferPtr, ScalarKeyHash> scalars_;
};

}  // namespace torchtpu::eager
