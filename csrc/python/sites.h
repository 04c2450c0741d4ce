// Installs the source-site hooks (sites.cpp); `internal_dirs` are path
// prefixes of library code whose frames are skipped.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

namespace torchtpu::python {
void install_site_hooks(std::vector<std::string> internal_dirs);
// While set (non-empty), ops this thread issues take `text` as their source
// position ("file:line in function"): a compiled graph's node names the
// user's line its FX stack trace holds. Empty clears it.
void set_site_text(const std::string& text);
// A Python callable (or null) called with no arguments, holding the GIL, when
// an op is issued while compilations wait to be reported (recompiles.h).
void set_recompile_hook(PyObject* hook);
}
