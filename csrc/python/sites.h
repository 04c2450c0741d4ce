// Installs the source-site hooks (sites.cpp); `internal_dirs` are path
// prefixes of library code whose frames are skipped.
#pragma once

#include <string>
#include <vector>

namespace torchtpu::python {
void install_site_hooks(std::vector<std::string> internal_dirs);
}
