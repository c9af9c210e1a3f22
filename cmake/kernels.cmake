# Device code: ptx/ kernels compiled by nvcc to fatbins, embedded into
# libggemm with .incbin, loaded at run time through cuLibraryLoadData.
#
# One fatbin per source so that they build in parallel; each holds every
# architecture we ship (sm_90a now; sm_100a joins here).
set(GGEMM_KERNEL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/sm90/kernels_bf16.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/sm90/kernels_fp16.cu)
set(GGEMM_KERNEL_GENCODE -gencode=arch=compute_90a,code=sm_90a)
file(GLOB_RECURSE GGEMM_PTX_HEADERS CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.h ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.cuh ${CMAKE_CURRENT_SOURCE_DIR}/ptx/*.inc)

set(GGEMM_FATBINS)
set(GGEMM_FATBIN_INCBINS "")
set(GGEMM_FATBIN_SYMBOLS "")
foreach(src ${GGEMM_KERNEL_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  get_filename_component(dir ${src} DIRECTORY)
  get_filename_component(arch ${dir} NAME)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/kernels/${arch}_${name}.fatbin)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/kernels
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -std=c++17 -O3 -fatbin ${GGEMM_KERNEL_GENCODE}
            -Xptxas=-warn-spills -Werror=all-warnings -o ${out} ${src}
    DEPENDS ${src} ${GGEMM_PTX_HEADERS}
    COMMENT "nvcc: ${arch}/${name}.cu -> fatbin"
    VERBATIM)
  list(APPEND GGEMM_FATBINS ${out})
  string(APPEND GGEMM_FATBIN_INCBINS
    "  .balign 64\n  .hidden ggemm_fatbin_${arch}_${name}\n  .globl ggemm_fatbin_${arch}_${name}\n"
    "ggemm_fatbin_${arch}_${name}:\n  .incbin \"${out}\"\n")
  string(APPEND GGEMM_FATBIN_SYMBOLS "  .quad ggemm_fatbin_${arch}_${name}\n")
endforeach()
list(LENGTH GGEMM_FATBINS GGEMM_FATBIN_COUNT)
add_custom_target(ggemm_fatbins DEPENDS ${GGEMM_FATBINS})

set(GGEMM_FATBIN_ASM ${CMAKE_CURRENT_BINARY_DIR}/ggemm_fatbins.S)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/fatbins.S.in ${GGEMM_FATBIN_ASM} @ONLY)
set_source_files_properties(${GGEMM_FATBIN_ASM} PROPERTIES OBJECT_DEPENDS "${GGEMM_FATBINS}")
