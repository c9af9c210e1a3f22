// The MoE routing and combine kernels for this architecture (ptx/moe/).
#include "../moe/kernels_moe_entry.cuh"
