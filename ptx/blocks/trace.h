// Per-stage event tracing for diagnostic builds (cmake -DGGEMM_TRACE=ON).
//
// Some questions the benchmarks cannot answer (why a stage takes as long
// whatever its bytes, why a call's later tiles cost more than its first,
// how long a tile's epilogue holds the tensor cores idle) need to know when
// each stage was issued and when it arrived, on one SM's clock. In a trace build the producer thread and thread 0 of
// each consumer warpgroup record events into a device buffer the runtime
// allocates per traced launch and writes to GGEMM_TRACE_FILE
// (runtime/trace.cpp); bench/dev/trace_report.py reads it.
//
// In every other build TraceWriter is empty and inlined away: the kernels'
// SASS is the same as without this header (checked when it was added).
//
// Traced kernels run markedly slower than the default build (two global
// stores per event; the producer spills a few bytes), so gaps between
// events on the critical path come out inflated. Use the trace for order
// and shape (who waits for whom, how many stages run ahead), and confirm
// any cost it suggests by an A/B of the default build.
//
// Buffer: [CTA][role][event] of two uint64: the value (clock64, or
// %globaltimer in ns for kTraceGlobaltimer) and kind << 32 | argument. Roles:
// 0 producer, 1 + w consumer warpgroup w. Events past kTraceEvents per role
// are dropped; the end event (kept, in the last two slots if need be) says
// how many there were.
#pragma once
#include <cstdint>

#include "../instr/arch.h"

namespace ggemm {

constexpr uint32_t kTraceRoles = 3;
constexpr uint32_t kTraceEvents = 4096;  // per role and CTA
constexpr uint32_t kTraceWordsPerCta = kTraceRoles * kTraceEvents * 2;

enum TraceKind : uint32_t {
  kTraceStart = 1,        // role starts its loop (after the CTA's barrier init); arg 0
  kTraceGlobaltimer = 2,  // value = %globaltimer (ns) at the same moment as the event before
  kTraceIssue = 3,        // producer: stage loads issued (empty barrier passed); arg = stage sequence number
  kTraceFull = 4,         // consumer: full barrier passed; arg = stage sequence number
  kTraceRelease = 5,      // consumer: stage released; arg = stage sequence number
  kTraceTile = 6,         // role starts a tile; arg = linear tile index (low 32 bits)
  kTraceEpilogue = 7,     // consumer: epilogue starts; arg = linear tile index
  kTraceEpilogueEnd = 8,  // consumer: epilogue done; arg = linear tile index
  kTraceEnd = 9,          // role leaves its loop; arg = events recorded (may exceed kTraceEvents)
};

#if defined(__CUDACC__)
#if GGEMM_TRACE
// Records events of one role of one CTA; only the recording thread uses it.
class TraceWriter {
 public:
  GGEMM_DEVICE TraceWriter(uint64_t *buffer, uint32_t role)
      : slot_(buffer ? buffer + (uint64_t(blockIdx.x) * kTraceRoles + role) * kTraceEvents * 2 : nullptr) {}

  GGEMM_DEVICE void record(TraceKind kind, uint32_t arg) {
    uint64_t clock;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clock));
    put(clock, kind, arg);
  }
  // The role's first and last events carry %globaltimer too, so the report
  // can convert cycles to ns and line the CTAs up on one time axis.
  GGEMM_DEVICE void record_with_time(TraceKind kind, uint32_t arg) {
    record(kind, arg);
    uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    put(ns, kTraceGlobaltimer, 0);
  }
  GGEMM_DEVICE void finish() {
    const uint32_t total = n_ + 2;
    if (n_ > kTraceEvents - 2) n_ = kTraceEvents - 2;
    record_with_time(kTraceEnd, total);
  }
  // Stage sequence numbers: the producer counts what it issued, each
  // consumer what it consumed; the same numbers name the same stages.
  GGEMM_DEVICE uint32_t next_stage() { return stage_++; }
  GGEMM_DEVICE uint32_t stages_seen() const { return stage_; }

 private:
  GGEMM_DEVICE void put(uint64_t value, uint32_t kind, uint32_t arg) {
    if (slot_ && n_ < kTraceEvents) {
      slot_[2 * n_] = value;
      slot_[2 * n_ + 1] = uint64_t(kind) << 32 | arg;
    }
    ++n_;
  }
  uint64_t *slot_;
  uint32_t n_ = 0;
  uint32_t stage_ = 0;
};
#else
class TraceWriter {
 public:
  GGEMM_DEVICE TraceWriter(const uint64_t *, uint32_t) {}
  GGEMM_DEVICE void record(TraceKind, uint32_t) {}
  GGEMM_DEVICE void record_with_time(TraceKind, uint32_t) {}
  GGEMM_DEVICE void finish() {}
  GGEMM_DEVICE uint32_t next_stage() { return 0; }
  GGEMM_DEVICE uint32_t stages_seen() const { return 0; }
};
#endif
#endif

}  // namespace ggemm
