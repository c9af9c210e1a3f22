# Device code: ptx/ kernels compiled by nvcc to fatbins, embedded into
# libggemm with .incbin, loaded at run time through cuLibraryLoadData.
#
# One fatbin per source so that they build in parallel, and one architecture
# per fatbin: sm_90a and sm_100a code are arch-specific ('a') and each runs on
# exactly one compute capability (9.0, 10.0), so the runtime loads only the
# fatbins tagged with its device's architecture (ggemm_fatbin_arch[],
# cmake/fatbins.S.in); loading an sm_100a-only fatbin on an H200 would fail.
#
# ptx/<dir>/kernels_<name>.cu for each <dir> below and each <name> of its
# list, compiled with its gencode; the number is what runtime/device.cpp
# compares with the device (arch_number()). The names: the GEMM kernels of
# each operand dtype (sm_90a's store-only and accumulate-only persistent
# kernels apart, store_*, accumulate_*),
# and moe, the MoE layer's routing and combine kernels (plain CUDA C++ in
# ptx/moe/, the same source for every architecture).
set(GGEMM_KERNEL_DIRS sm90 sm100)
set(GGEMM_KERNEL_sm90_ARCH 90)
set(GGEMM_KERNEL_sm90_GENCODE -gencode=arch=compute_90a,code=sm_90a)
set(GGEMM_KERNEL_sm100_ARCH 100)
set(GGEMM_KERNEL_sm100_GENCODE -gencode=arch=compute_100a,code=sm_100a)
set(GGEMM_KERNEL_sm90_SOURCES bf16 fp16 store_bf16 store_fp16 accumulate_bf16 accumulate_fp16 moe)
set(GGEMM_KERNEL_sm100_SOURCES bf16 fp16 moe)
# The MoE kernels' own headers: the kernels_moe fatbins, and the GEMM
# fatbins too (the decode GEMV routes the MoE layer's slots in its prologue
# with the routing's one-warp code: ptx/sm90/decode_gemv.cuh).
file(GLOB GGEMM_MOE_HEADERS CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/moe/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/moe/*.cuh)
# Spills are errors, except in trace builds (GGEMM_TRACE): recording events
# costs the knife-edge kernels a few registers, and those builds measure
# cycles between events, not speed.
if(GGEMM_TRACE)
  set(GGEMM_KERNEL_FLAGS -DGGEMM_TRACE=1)
else()
  set(GGEMM_KERNEL_FLAGS -Xptxas=-warn-spills -Werror=all-warnings)
endif()

# Every device header (the sm_100a probe in tests/ depends on all of them) ...
file(GLOB_RECURSE GGEMM_PTX_HEADERS CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.cuh ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.inc)
# ... and those shared by every architecture: the instruction wrappers of
# ptx/instr/ (not its sm90/, sm100/ subfolders) and the building blocks of
# ptx/blocks/, so an edit under ptx/sm100/ or ptx/instr/sm100/ does not
# rebuild the sm_90a fatbins.
file(GLOB GGEMM_PTX_COMMON_HEADERS CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/instr/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/instr/*.cuh
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/instr/*.inc
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/blocks/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/blocks/*.cuh)

set(GGEMM_FATBINS)        # every fatbin (tests/check_sass.py)
set(GGEMM_SM90_FATBINS)   # per architecture (the sm_100a SASS test)
set(GGEMM_SM100_FATBINS)   # (the GEMM kernels only: the tcgen05 SASS test)
set(GGEMM_FATBIN_INCBINS "")
set(GGEMM_FATBIN_SYMBOLS "")
set(GGEMM_FATBIN_ARCHS "")
foreach(dir ${GGEMM_KERNEL_DIRS})
  # The architecture's kernels (ptx/<dir>/) and its instruction wrappers
  # (ptx/instr/<dir>/).
  file(GLOB_RECURSE arch_headers CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/ptx/${dir}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/${dir}/*.cuh
    ${CMAKE_CURRENT_SOURCE_DIR}/ptx/${dir}/*.inc
    ${CMAKE_CURRENT_SOURCE_DIR}/ptx/instr/${dir}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/instr/${dir}/*.inc)
  # sm_100a builds the decode GEMV of ptx/sm90/ (its parameters and kernel).
  if(dir STREQUAL "sm100")
    file(GLOB sm90_headers CONFIGURE_DEPENDS
      ${CMAKE_CURRENT_SOURCE_DIR}/ptx/sm90/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/sm90/*.cuh)
    list(APPEND arch_headers ${sm90_headers})
  endif()
  foreach(dtype ${GGEMM_KERNEL_${dir}_SOURCES})
    set(name kernels_${dtype})
    set(src ${CMAKE_CURRENT_SOURCE_DIR}/ptx/${dir}/${name}.cu)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/kernels/${dir}_${name}.fatbin)
    if(dtype STREQUAL "moe")
      set(deps ${GGEMM_MOE_HEADERS} ${GGEMM_PTX_COMMON_HEADERS})
    else()
      set(deps ${GGEMM_PTX_COMMON_HEADERS} ${arch_headers} ${GGEMM_MOE_HEADERS})
    endif()
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/kernels
      # ptxas reports serialised wgmmas as info only: the wrapper fails on them.
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cmake/nvcc_no_wgmma_serialization.sh
              ${CUDAToolkit_NVCC_EXECUTABLE} -std=c++17 -O3 -fatbin ${GGEMM_KERNEL_${dir}_GENCODE}
              ${GGEMM_KERNEL_FLAGS} -o ${out} ${src}
      DEPENDS ${src} ${deps} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/nvcc_no_wgmma_serialization.sh
      COMMENT "nvcc: ${dir}/${name}.cu -> fatbin (sm_${GGEMM_KERNEL_${dir}_ARCH}a)"
      VERBATIM)
    # Every fatbin's SASS is checked for local memory (tests/check_sass.py);
    # the per-architecture lists hold the GEMM kernels, whose tensor-core
    # instructions the sm_100a test looks for.
    list(APPEND GGEMM_FATBINS ${out})
    string(TOUPPER ${dir} DIR)
    if(NOT dtype STREQUAL "moe")
      list(APPEND GGEMM_${DIR}_FATBINS ${out})
    endif()
    string(APPEND GGEMM_FATBIN_INCBINS
      "  .balign 64\n  .hidden ggemm_fatbin_${dir}_${name}\n  .globl ggemm_fatbin_${dir}_${name}\n"
      "ggemm_fatbin_${dir}_${name}:\n  .incbin \"${out}\"\n")
    string(APPEND GGEMM_FATBIN_SYMBOLS "  .quad ggemm_fatbin_${dir}_${name}\n")
    string(APPEND GGEMM_FATBIN_ARCHS "  .long ${GGEMM_KERNEL_${dir}_ARCH}\n")
  endforeach()
endforeach()
list(LENGTH GGEMM_FATBINS GGEMM_FATBIN_COUNT)
add_custom_target(ggemm_fatbins DEPENDS ${GGEMM_FATBINS})

set(GGEMM_FATBIN_ASM ${CMAKE_CURRENT_BINARY_DIR}/ggemm_fatbins.S)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/fatbins.S.in ${GGEMM_FATBIN_ASM} @ONLY)
set_source_files_properties(${GGEMM_FATBIN_ASM} PROPERTIES OBJECT_DEPENDS "${GGEMM_FATBINS}")
