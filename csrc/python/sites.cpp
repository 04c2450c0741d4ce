// Op sites for error messages (DESIGN decision 7): the user's source position
// of each op, captured cheaply (a code object and an instruction offset) and
// turned into "file:line in function" only when an error is reported.
// Frames inside torch and torchtpu are skipped; an op issued by the autograd
// engine takes the site of the forward op that created its node.
#include <Python.h>
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>

#include <array>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "eager/recompiles.h"
#include "eager/runtime.h"
#include "eager/slot.h"
#include "python/sites.h"

namespace torchtpu::python {

namespace {

std::vector<std::string> internal_prefixes;
std::mutex code_mu;
std::unordered_map<PyCodeObject*, bool> is_internal;  // holds a reference to each code

bool internal(PyCodeObject* code) {
  std::lock_guard<std::mutex> lock(code_mu);
  auto it = is_internal.find(code);
  if (it != is_internal.end()) return it->second;
  bool in = false;
  if (const char* file = PyUnicode_AsUTF8(code->co_filename)) {
    for (const std::string& p : internal_prefixes) in |= std::string(file).rfind(p, 0) == 0;
  } else {
    PyErr_Clear();
  }
  Py_INCREF(code);
  is_internal.emplace(code, in);
  return in;
}

// Forward sites by (forward thread, autograd sequence number), so backward
// ops find theirs; and each forward thread's issuer token, so a backward op
// whose site was not kept still goes to its forward thread.
constexpr size_t kRing = 1 << 14;
struct RingEntry {
  uint64_t seq = 0;
  uint64_t thread = 0;  // at::RecordFunction::currentThreadId() of the forward op
  eager::SiteRef site;
};
std::mutex ring_mu;
std::array<RingEntry, kRing> ring;
std::unordered_map<uint64_t, uint64_t> issuer_of_thread;  // guarded by ring_mu

size_t ring_index(uint64_t seq, uint64_t thread) { return (seq + thread * 0x9E3779B97F4A7C15ULL) % kRing; }

// A thread without the GIL must not take it once the interpreter finalizes:
// CPython ends such a thread with pthread_exit, whose forced unwinding
// through the dispatcher's noexcept frames aborts the process. It waits
// here until the process ends instead (as the runtime parks late threads).
void park_if_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!finalizing || PyGILState_Check()) return;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

PyObject* recompile_hook = nullptr;  // a strong reference, set with the GIL held

// Holding the GIL: hands waiting compilation reports to the Python layer.
void report_recompiles() {
  thread_local bool inside = false;
  if (!recompile_hook || inside || !eager::recompile_log().has_events()) return;
  inside = true;
  PyObject* type;
  PyObject* value;
  PyObject* trace;
  PyErr_Fetch(&type, &value, &trace);
  PyObject* r = PyObject_CallNoArgs(recompile_hook);
  if (r) {
    Py_DECREF(r);
  } else {
    PyErr_WriteUnraisable(recompile_hook);
  }
  PyErr_Restore(type, value, trace);
  inside = false;
}

// `h` with the nearest user frames (code and instruction) that called
// frame `f` mixed in: three of them tell apart the layers one line serves, and stop
// short of the script's own lines (a warm-up call and a loop's call reach a
// layer the same way).
uint64_t callers_of(PyFrameObject* f, uint64_t h) {
  Py_INCREF(f);
  int users = 0;
  for (int depth = 0; depth < 64 && users < 3; ++depth) {
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
    if (!f) break;
    PyCodeObject* code = PyFrame_GetCode(f);
    const bool skip = internal(code);
    Py_DECREF(code);  // kept alive by is_internal
    if (skip) continue;
    ++users;
    h = (h ^ reinterpret_cast<uintptr_t>(code)) * 0x100000001B3ULL;
    h = (h ^ static_cast<uint64_t>(PyFrame_GetLasti(f))) * 0x100000001B3ULL;
  }
  Py_XDECREF(f);
  return h;
}

eager::SiteRef python_site() {
  eager::SiteRef out;
  park_if_finalizing();
  PyGILState_STATE gil = PyGILState_Ensure();
  // Strict Eager: the path of frames that issued the op, for bucketing: the
  // lines inside torch that issued it (one user line reaching a whole
  // nn.TransformerEncoderLayer issues many ops, its two linear layers from
  // two lines of it) and the nearest user frames above the user's line.
  const bool path = eager::Runtime::get().mode() == eager::EagerMode::kStrict;
  uint64_t h = 0x84222325CBF29CE4ULL;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  eager::SiteRef innermost;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    eager::SiteRef here{code, PyFrame_GetLasti(f)};
    bool skip = internal(code);
    Py_DECREF(code);  // kept alive by is_internal
    if (!innermost.code) innermost = here;
    if (!skip) {
      out = here;
      if (path) out.callers = callers_of(f, h);
      Py_DECREF(f);
      break;
    }
    if (path) {
      h = (h ^ reinterpret_cast<uintptr_t>(here.code)) * 0x100000001B3ULL;
      h = (h ^ static_cast<uint64_t>(here.lasti)) * 0x100000001B3ULL;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  report_recompiles();
  PyGILState_Release(gil);
  return out.code ? out : innermost;
}

// Source positions given as text (set_site_text): interned for the
// process, marked by lasti -2.
constexpr int kTextSite = -2;
std::mutex texts_mu;
std::set<std::string>& texts = *new std::set<std::string>;
thread_local const std::string* site_text = nullptr;

eager::SiteRef capture_ref();

eager::SiteRef capture() {
  eager::SiteRef s = capture_ref();
  if (site_text) {
    s.code = site_text;
    s.lasti = kTextSite;
  }
  return s;
}

eager::SiteRef capture_ref() {
  if (auto node = torch::autograd::get_current_node()) {
    const uint64_t seq = node->sequence_nr() + 1, thread = node->thread_id();
    std::lock_guard<std::mutex> lock(ring_mu);
    // A node whose forward op issued nothing here (a view's) takes the site
    // of the forward op just before it.
    for (uint64_t back = 0; back < 8 && back < seq; ++back) {
      const RingEntry& e = ring[ring_index(seq - back, thread)];
      if (e.seq == seq - back && e.thread == thread && e.site.issuer != 0) return e.site;
    }
    auto it = issuer_of_thread.find(thread);
    return eager::SiteRef{nullptr, -1, it != issuer_of_thread.end() ? it->second : eager::kAnyIssuer};
  }
  if (!Py_IsInitialized()) return {};
  eager::SiteRef s = python_site();
  s.issuer = eager::thread_token();  // a backward op's errors go to its forward op's thread
  const uint64_t seq = at::sequence_number::peek(), thread = at::RecordFunction::currentThreadId();
  thread_local bool noted = false;
  std::lock_guard<std::mutex> lock(ring_mu);
  if (!noted) {
    issuer_of_thread[thread] = s.issuer;
    noted = true;
    eager::Runtime::note_issuing_thread();
  }
  ring[ring_index(seq, thread)] = RingEntry{seq, thread, s};
  return s;
}

// The stripped text of `file`'s line `line` (linecache, as tracebacks show
// it), at most 100 characters; empty when unknown. Holds the GIL.
std::string source_text(const char* file, int line) {
  std::string out;
  PyObject* linecache = PyImport_ImportModule("linecache");
  PyObject* text = linecache ? PyObject_CallMethod(linecache, "getline", "si", file, line) : nullptr;
  const char* utf8 = text && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : nullptr;
  if (utf8) {
    out = utf8;
    const size_t b = out.find_first_not_of(" \t\r\n"), e = out.find_last_not_of(" \t\r\n");
    out = b == std::string::npos ? std::string() : out.substr(b, e - b + 1);
    if (out.size() > 100) out = out.substr(0, 97) + "...";
  }
  Py_XDECREF(text);
  Py_XDECREF(linecache);
  PyErr_Clear();
  return out;
}

std::string format(eager::SiteRef s, bool with_source) {
  if (s.lasti == kTextSite) return *static_cast<const std::string*>(s.code);
  if (!Py_IsInitialized()) return {};
  park_if_finalizing();
  PyGILState_STATE gil = PyGILState_Ensure();
  auto* code = static_cast<PyCodeObject*>(const_cast<void*>(s.code));
  std::string out;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  const char* name = PyUnicode_AsUTF8(code->co_name);
  if (file && name) {
    const int line = PyCode_Addr2Line(code, s.lasti);
    out = std::string(file) + ":" + std::to_string(line) + " in " + name;
    const std::string text = with_source ? source_text(file, line) : std::string();
    if (!text.empty()) out += ": " + text;
  }
  PyErr_Clear();
  PyGILState_Release(gil);
  return out;
}

}  // namespace

void set_site_text(const std::string& text) {
  if (text.empty()) {
    site_text = nullptr;
    return;
  }
  std::lock_guard<std::mutex> lock(texts_mu);
  site_text = &*texts.insert(text).first;
}

void set_recompile_hook(PyObject* hook) {
  Py_XINCREF(hook);
  Py_XDECREF(recompile_hook);
  recompile_hook = hook;
}

void install_site_hooks(std::vector<std::string> internal_dirs) {
  internal_prefixes = std::move(internal_dirs);
  eager::set_site_hooks(&capture, &format);
}

}  // namespace torchtpu::python
