# Helpers for the CUDA emulator build (RINGMASTER_CUDA_EMU=ON; cuda_emu/).
#
# cuda_emu_add_kernels(<target> [RACECHECK] SOURCES a.cu b.cu ...)
#   A static library of the given .cu files compiled as host C++: each is first rewritten by
#   cuda_emu_rewrite.py (<<<>>> launches, __shared__ declarations; launches of the kernels that
#   cuda_emu_fiber_free.py finds fiber-free take the fast path) into the build tree, then
#   compiled with the emulator's header force-included (target cuda_emu). The rewrite reads the
#   project headers a source includes (a depfile reruns it when one changes). RACECHECK also builds
#   them with the compiler's thread-sanitizer instrumentation routed to the emulator's own
#   racecheck hooks (no TSan runtime): every load and store calls into the shared-memory race
#   detector, ~3x slower, so only the race tests use it.
find_package(Python3 REQUIRED COMPONENTS Interpreter)

function(cuda_emu_add_kernels target)
  cmake_parse_arguments(ARG "RACECHECK" "" "SOURCES" ${ARGN})
  set(generated)
  foreach(src ${ARG_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME_WE)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}.emu/${name}.emu.cc)
    add_custom_command(OUTPUT ${out}
      COMMAND ${Python3_EXECUTABLE} ${CUDA_EMU_DIR}/cuda_emu_rewrite.py ${abs} ${out}
        --include-root ${CMAKE_SOURCE_DIR} --depfile ${out}.d
      DEPENDS ${abs} ${CUDA_EMU_DIR}/cuda_emu_rewrite.py ${CUDA_EMU_DIR}/cuda_emu_fiber_free.py
      DEPFILE ${out}.d
      COMMENT "cuda_emu rewrite ${src}" VERBATIM)
    list(APPEND generated ${out})
  endforeach()
  add_library(${target} STATIC ${generated})
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC cuda_emu)
  # Device code is often written with unused parameters and the like under nvcc's warnings.
  # Debug info for the emulator's file:line reports; DWARF 4 because binutils' addr2line reads
  # clang 14's DWARF 5 line tables with the generated file's name instead of the #line'd .cu.
  target_compile_options(${target} PRIVATE -g $<$<CXX_COMPILER_ID:Clang>:-gdwarf-4>
    -Wno-unused-parameter -Wno-sign-compare)
  if(ARG_RACECHECK)
    # In the sanitizer build AddressSanitizer and the thread instrumentation exclude each other:
    # these objects trade ASan for racecheck (UBSan stays).
    target_compile_options(${target} PRIVATE -fno-sanitize=address -fsanitize=thread)
    target_link_libraries(${target} PUBLIC cuda_emu_racecheck)
  endif()
endfunction()
