// Installs the source-site hooks (sites.cpp); `internal_dirs` are path
// prefixes of library code whose frames are skipped.
#pragma once

#include <string>
#include <vector>

namespace torchtpu::python {
void install_site_hooks(std::vector<std::string> internal_dirs);
// While set (non-empty), ops this thread issues take `text` as their source
// position ("file:line in function"): a compiled graph's node names the
// user's line its FX stack trace holds. Empty clears it.
void set_site_text(const std::string& text);
}
