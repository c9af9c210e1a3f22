// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+). Every
// ggemm launch asks the driver to let it start before the kernel ahead of it
// in the stream has finished (runtime: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_
// STREAM_SERIALIZATION), so its CTAs are placed and its prologue (barrier
// inits, descriptor prefetches) runs while that kernel drains. In exchange
// every kernel waits, in every thread, before its first access to global
// memory that another kernel may write or read: then each kernel still sees
// all of the stream's earlier work, as without the attribute (a kernel
// completes only after its own wait, so the order is transitive). That
// holds as long as every kernel launched with the attribute waits so: a
// kernel of another library launched with it that does not wait could
// finish before the ggemm kernel ahead of it, and the ggemm kernel behind
// it waits only for that one.
//
// One kind of access is allowed before the wait: a hint. A kernel may load
// its inputs relaxed (ld.relaxed.gpu, which bypasses L1; a kernel still
// writing them may make the value any old or new one) only to compute
// addresses, bounded whatever the value, that it prefetches into L2, the
// GPU's point of coherence, where no line can go stale (the MoE decode down
// projection, ptx/moe/decode_down.cuh). A hint read wrong costs bandwidth,
// never a wrong result. No L1 prefetch and no plain load before the wait:
// either could leave a stale line in L1.
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// Blocks until the grids this one depends on have completed and their
// memory operations are visible; returns at once when launched without the
// attribute.
GGEMM_DEVICE void wait_prior_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the stream's next kernel be scheduled once every CTA of this grid has
// called it (or exited). Called at entry: a CTA that calls it is resident, so
// the next kernel's waiting CTAs never hold an SM this grid still needs.
GGEMM_DEVICE void launch_dependent_grids() { asm volatile("griddepcontrol.launch_dependents;" :::); }

}  // namespace ggemm::ptx
#endif
