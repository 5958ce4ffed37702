// What this build is, for --version and logs: the version, the git revision it was configured
// from, and which engines it carries. Filled at configure time (CMakeLists.txt writes
// ringmaster_build_info.h into the build tree).
#pragma once

#include <string>

namespace ringmaster {

// "0.1.0 (git 51f9f83-dirty)\nbuild: Release; CUDA engine: ...; NCCL: ..."
std::string VersionText();
// "51f9f83-dirty", or "unknown" when built outside a git checkout.
std::string GitRevision();

}  // namespace ringmaster
