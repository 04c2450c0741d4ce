// torchtpu._C bindings of the compile cache tiers (torchtpu/cache.py wraps
// them). Plain pybind11: nothing here touches tensors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cache/executable_cache.h"
#include "eager/buckets.h"
#include "eager/recompiles.h"
#include "eager/runtime.h"
#include "python/sites.h"

namespace py = pybind11;

namespace torchtpu::python {

namespace {

using eager::Runtime;

void put_tier(py::dict& d, const char* name, const std::shared_ptr<cache::DiskTier>& tier) {
  const std::string n = name;
  d[(n + "_enabled").c_str()] = tier && tier->enabled();
  d[(n + "_root").c_str()] = tier ? tier->root() : std::string();
  d[(n + "_dir").c_str()] = tier && tier->enabled() ? tier->dir() : std::string();
  d[(n + "_off_reason").c_str()] = tier ? tier->reason() : std::string("not configured");
  d[(n + "_signed").c_str()] = tier && tier->is_signed();
}

py::dict config() {
  cache::ExecutableCache& c = Runtime::get().cache();
  auto local = c.local_tier(), shared = c.shared_tier();
  py::dict d;
  put_tier(d, "local", local);
  put_tier(d, "shared", shared);
  d["fingerprint"] = local ? local->fingerprint() : std::string();
  d["max_bytes"] = local ? local->max_bytes() : int64_t{0};
  d["memory_entries"] = static_cast<int64_t>(c.memory_entries());
  return d;
}

py::dict stats() {
  Runtime& rt = Runtime::get();
  cache::CacheStats s;
  {
    py::gil_scoped_release nogil;
    rt.drain();  // count what is queued, as debug.metrics() does
    s = rt.cache().stats_rescanned();
  }
  py::dict d;
  d["requests"] = s.requests;
  d["hits"] = s.hits;
  d["memory_hits"] = s.memory_hits;
  d["local_hits"] = s.local_hits;
  d["shared_hits"] = s.shared_hits;
  d["misses"] = s.misses;
  d["compilations"] = rt.compilations();
  d["compile_seconds"] = s.compile_seconds;
  d["load_seconds"] = s.load_seconds;
  d["corrupt_entries"] = s.corrupt_entries;
  d["store_errors"] = s.store_errors;
  d["memory_entries"] = static_cast<int64_t>(rt.cache().size());
  d["memory_evictions"] = s.memory_evictions;
  d["local_bytes"] = s.local_bytes;
  d["shared_bytes"] = s.shared_bytes;
  return d;
}

// The compilations not yet reported, oldest first, with their causes.
py::list recompile_events() {
  py::list out;
  for (const eager::RecompileLog::Event& e : eager::recompile_log().drain()) {
    py::dict d;
    d["site"] = eager::format_site(e.site.where);
    d["op"] = std::string(e.site.op ? e.site.op : "");
    d["cause"] = eager::RecompileLog::name(e.cause);
    d["detail"] = e.detail;
    d["site_compilations"] = e.site_count;
    d["site_recompilations"] = e.shape_count;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_cache(py::module_& m) {
  m.def(
      "_cache_configure",
      [](const std::string& local_dir, const std::string& shared_dir, int64_t max_bytes, const std::string& identity,
         const py::bytes& shared_key) {
        std::string key = shared_key;
        py::gil_scoped_release nogil;
        return Runtime::get().configure_cache(local_dir, shared_dir, max_bytes, identity, key);
      },
      py::arg("local_dir"), py::arg("shared_dir"), py::arg("max_bytes"), py::arg("identity"),
      py::arg("shared_key") = py::bytes());
  m.def("_cache_set_lock_timeout", [](double seconds) { Runtime::get().cache().set_lock_timeout(seconds); },
        py::arg("seconds"));
  m.def("_cache_set_memory_entries", [](int64_t n) { Runtime::get().cache().set_memory_entries(n < 1 ? 1 : n); },
        py::arg("n"));
  m.def("_cache_config", &config);
  m.def("_recompile_events", &recompile_events);
  m.def("_set_buckets", [](std::vector<int64_t> sizes) { eager::buckets().set_sizes(std::move(sizes)); });
  m.def("_set_bucket_poison", [](bool on) { eager::buckets().set_poison(on); });
  m.def("_bucket_of", [](int64_t v) { return eager::buckets().bucket_of(v); });
  m.def("_bucket_stats", [] {
    const eager::Buckets::Stats s = eager::buckets().stats();
    py::dict d;
    d["programs"] = s.programs;
    d["refused"] = s.refused;
    d["stand_ins"] = s.stand_ins;
    d["compiling"] = s.compiling;
    d["exact_elements"] = s.exact_elements;
    d["padded_elements"] = s.padded_elements;
    d["last_refusal"] = s.last_refusal;
    return d;
  });
  m.def("_recompile_counts", [] { return eager::recompile_log().counts(); });
  m.def("_set_recompile_hook", [](py::object hook) { set_recompile_hook(hook.is_none() ? nullptr : hook.ptr()); });
  m.def("_cache_stats", &stats);
  m.def(
      "_cache_clear",
      [](bool local, bool shared) {
        Runtime& rt = Runtime::get();
        rt.cache().clear();
        return rt.cache().clear_disk(local, shared);
      },
      py::arg("local"), py::arg("shared"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace torchtpu::python
