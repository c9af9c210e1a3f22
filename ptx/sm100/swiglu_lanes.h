// Where the SwiGLU epilogue of the sm_100a grouped GEMM finds each value in
// tensor memory, and how a gate lane and its up lane split the work:
// host-device, so tests/test_sm100_moe.cpp checks the arithmetic on the CPU
// against the 5-D weight view's box layout (the kernel itself never ran).
//
// The weights' 5-D view (runtime/launch_grouped.cpp, encode_swiglu_weights,
// shared with sm_90a) lands a tile's 128 rows as 8 octet pairs (a narrow
// tile's 64 as 4: the lanes past them, warps 2 and 3, hold features 32..63,
// which lie past its columns and are never stored): shared-memory
// row s = 16 o + 8 u + i holds gate row (u = 0) or up row (u = 1) of the
// tile's feature 8 o + i (kSwigluOctet). The MMA's M row s is tensor-memory
// lane s, and epilogue warp q reads lanes 32q..32q+31, so its lane l holds
// s = 32q + l: u = (l / 8) % 2, feature 16q + 8 (l / 16) + l % 8, and the
// other value of the same feature is in lane l ^ 8 of the same warp.
//
// Per 8-token chunk (one tcgen05.ld 32x32b.x8) the two lanes of a feature
// swap half their values, so each computes 4 outputs: the gate lane tokens
// 0..3 (its gates, the partner's ups), the up lane tokens 4..7 (the
// partner's gates, its ups).
#pragma once
#include <cstdint>

#include "../blocks/grouped_params.h"
#include "../instr/arch.h"

namespace ggemm::sm100 {

struct SwigluLanes {
  static constexpr uint32_t kPartnerXor = kSwigluOctet;  // lane ^ 8: the same feature's other row

  // Lane l of a warp holds an up row (else a gate row).
  GGEMM_HOST_DEVICE static constexpr bool is_up(uint32_t lane) { return (lane / kSwigluOctet) % 2 != 0; }
  // The tile's feature (output column col0 / 2 + feature) of warp q's lane.
  GGEMM_HOST_DEVICE static constexpr uint32_t feature(uint32_t q, uint32_t lane) {
    return 16 * q + kSwigluOctet * (lane / 16) + lane % kSwigluOctet;
  }
  // The first of the 4 tokens of each 8-token chunk this lane computes.
  GGEMM_HOST_DEVICE static constexpr uint32_t first_token(uint32_t lane) { return is_up(lane) ? 4 : 0; }
  // Of a chunk's 8 values v[0..7] (tokens 0..7), the i-th (0..3) this lane
  // sends to its partner, and the i-th it keeps. (A select between two
  // fixed elements, never an index computed from the lane: with i unrolled
  // the registers stay registers.)
  template <typename T>
  GGEMM_HOST_DEVICE static constexpr T sent(uint32_t lane, uint32_t i, const T (&v)[8]) {
    return is_up(lane) ? v[i] : v[4 + i];
  }
  template <typename T>
  GGEMM_HOST_DEVICE static constexpr T kept(uint32_t lane, uint32_t i, const T (&v)[8]) {
    return is_up(lane) ? v[4 + i] : v[i];
  }
  // The gate and the up value of this lane's i-th token, from what it kept
  // and what its partner sent.
  GGEMM_HOST_DEVICE static constexpr float gate(uint32_t lane, float mine, float theirs) {
    return is_up(lane) ? theirs : mine;
  }
  GGEMM_HOST_DEVICE static constexpr float up(uint32_t lane, float mine, float theirs) {
    return is_up(lane) ? mine : theirs;
  }
};

}  // namespace ggemm::sm100
