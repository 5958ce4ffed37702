// Checks the stand-ins make before touching an operand: the whole byte range lies inside one
// cudaMalloc allocation of the emulated runtime.
#pragma once

#include <cstddef>
#include <string>

namespace cuda_emu {

// "" if [p, p + bytes) lies inside one cudaMalloc allocation (bytes == 0: p may be anything);
// otherwise what is wrong: not device memory (a host or pinned-host pointer, or null), or how
// far the range runs past the end of the allocation it starts in. If `device` is not null it
// receives the allocation's device.
std::string CheckDeviceRange(const void* p, size_t bytes, int* device = nullptr);

}  // namespace cuda_emu
