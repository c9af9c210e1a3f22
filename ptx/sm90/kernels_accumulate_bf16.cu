// The accumulate-only persistent kernels of bf16 operands (kernel_table.h),
// in a fatbin of their own so that they compile beside the others.
#include "kernels_entry.cuh"
GGEMM_SM90_ACCUMULATE_KERNELS_BF16(GGEMM_SM90_DEFINE_ACCUMULATE_KERNEL)
