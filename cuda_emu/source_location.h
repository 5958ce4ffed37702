// Code address → "file:line (function)" for reports, through the addr2line of binutils when it
// is installed (the emulated tests are built with -g); otherwise the module and offset.
#pragma once

#include <string>

namespace cuda_emu {

std::string SourceLine(const void* pc);

}  // namespace cuda_emu
