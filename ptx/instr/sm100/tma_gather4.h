// TMA's gather4 mode on sm_100a: four rows of a 2-D tensor, at four
// independent row coordinates, in one instruction.
//
// PTX ISA sections (anchors stable across the chapter renumbering noted in
// tcgen05.h):
//   5.5.3.4    ".tile::scatter4 and .tile::gather4 modes"
//              #tensor-tiled-scatter4-gather4-modes: 2-D tensors only; the
//              four request coordinates each form a bounding box whose size
//              in dimension 1 must be one (the tensor map's box is {row
//              length, 1}); every other rule of the tile mode applies
//              (swizzle included; no interleave).
//   9.7.9.25   "cp.async.bulk.tensor" (as ptx/instr/tma.h): the
//              .tile::gather4 load mode, PTX ISA 8.6, sm_100a. The
//              coordinates are {column, row0, row1, row2, row3}: section
//              13.4 ("Changes in PTX ISA Version 8.7") corrects the earlier
//              {x0..x3, y} wording of 5.5.3.4 to this order.
//
// The four rows land one after another from the destination, as a box of
// four rows would (row i at dst + i * row bytes), and the swizzle is applied
// by shared-memory address as for any tile-mode box: four gathered rows
// written at row 4j of a 128B-swizzled K-major tile whose base is 1024-byte
// aligned land exactly where a whole tile box would have put rows
// 4j..4j+3. The bytes counted on the barrier are always four rows' worth;
// a row coordinate outside the tensor reads zeros (tile-mode out-of-bounds
// fill).
//
// Checked by ptxas (CUDA 13.0) assembling the sm_100a kernels: SASS
// UTMALDG.2D.GATHER4 (tests/check_sass_sm100.py --gather4). Never run.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <cstdio>

#include "../arch.h"
#include "../cvta.h"

#if defined(__CUDACC__)
namespace ggemm::sm100 {

// cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes
// — one thread; rows row0..row3 of `map` (box {cols, 1}), columns from
// `col`, into dst (16-byte aligned; 1024-byte alignment of the enclosing
// tile for the 128B swizzle to match a whole box), completing 4 * box bytes
// on `bar` (this CTA's shared memory).
GGEMM_DEVICE void tma_load_2d_gather4(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t col, int32_t row0,
                                      int32_t row1, int32_t row2, int32_t row3) {
#if GGEMM_SM100A
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(ptx::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(ptx::smem_addr(bar)), "r"(col), "r"(row0), "r"(row1), "r"(row2),
      "r"(row3)
      : "memory");
#else
  GGEMM_ARCH_TRAP("cp.async.bulk.tensor .tile::gather4");
#endif
}

}  // namespace ggemm::sm100
#endif
