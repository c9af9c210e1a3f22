#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz corpora (tests/fuzz/corpus/*/seed-*).

Each seed is encoded for the harness's FuzzedDataProvider calls, in the
order fuzz_validate.cpp / fuzz_reference.cpp make them. FuzzedDataProvider
takes integers from the END of the input, most significant byte first, so a
seed is the reversed stream of those bytes. If a harness's decoding changes,
these stay valid inputs (they just decode to something else): re-run this
script to re-aim them.

    python3 tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


class Stream:
    """Mirrors FuzzedDataProvider::ConsumeIntegralInRange (LLVM 14)."""

    def __init__(self):
        self.stream = bytearray()  # in consumption order

    def range(self, lo, hi, value):
        assert lo <= value <= hi, (lo, hi, value)
        span = hi - lo
        nbytes = 0
        while nbytes < 8 and (span >> (8 * nbytes)) > 0:
            nbytes += 1
        result = value - lo
        for i in reversed(range(nbytes)):  # most significant byte first
            self.stream.append((result >> (8 * i)) & 0xFF)
        return self

    def u8(self, v): return self.range(0, 0xFF, v)
    def u32(self, v): return self.range(0, 0xFFFFFFFF, v)
    def i32(self, v): return self.range(-2**31, 2**31 - 1, v)
    def i64(self, v): return self.range(-2**63, 2**63 - 1, v)
    def u64(self, v): return self.range(0, 2**64 - 1, v)
    def boolean(self, v): return self.u8(1 if v else 0)
    def pick(self, n, index): return self.range(0, n - 1, index)

    def data(self):
        return bytes(reversed(self.stream))


# ---- fuzz_validate ------------------------------------------------------------
ARGS_SIZE = 192  # sizeof(ggemm_grouped_matmul_args) on x86-64
ARGS_SIZE_010 = 184  # its size in 0.1.0, before group_ends
# group_ends (bit 23) replaces a_offsets unless bit 24 ("keep_a_offsets") is set too.
BITS = {"a_dtype": 0, "b_dtype": 1, "c_dtype": 2, "m": 3, "n": 4, "k": 5, "num_experts": 6, "a": 7, "b": 8,
        "c": 9, "transpose_b": 10, "a_offsets": 11, "expert_ids": 12, "expert_usage_stats": 13,
        "num_groups": 14, "max_rows_per_group": 15, "splits": 16, "epilogue": 17, "row_scale": 18,
        "config": 19, "group_ends": 23, "keep_a_offsets": 24}
ORDER = sorted(BITS, key=BITS.get)
DIMS = {"m", "n", "k", "num_experts", "num_groups", "max_rows_per_group"}
PTRS = {"a", "b", "c", "a_offsets", "expert_ids", "expert_usage_stats", "row_scale", "group_ends"}
ENUMS = {"a_dtype", "b_dtype", "c_dtype", "transpose_b", "epilogue"}


def validate_seed(fields=None, struct_size=None, config=None):
    """fields: name -> value (splits: (s0, s1)); config: 12 ints or None."""
    fields = dict(fields or {})
    s = Stream().u8(0)  # mode: an args struct
    if struct_size is None:
        s.range(0, 15, 2)  # sizeof
    elif struct_size == ARGS_SIZE_010:
        s.range(0, 15, 15)  # the 0.1.0 size
    else:
        s.range(0, 15, 1).range(0, 2 * ARGS_SIZE, struct_size)
    perturb = 0
    for name in fields:
        perturb |= 1 << BITS[name]
    if config is not None:
        perturb |= 1 << BITS["config"]
    s.u32(perturb)
    for name in ORDER:
        if name not in fields:
            continue
        v = fields[name]
        if name in ENUMS:
            s.range(0, 2, 2).i32(v)  # pick_enum: raw int32
        elif name in DIMS:
            s.range(0, 4, 4).i64(v)  # pick_dim: raw int64
        elif name in PTRS:
            s.range(0, 4, 4).u64(v)  # pick_ptr: raw address
        elif name == "splits":
            s.range(0, 4, 4).i64(v[0]).range(0, 4, 4).i64(v[1])  # bit 21 off: split1 is a pick_dim
    if config is not None:
        s.boolean(True)  # struct_size = sizeof(ggemm_config)
        for v in config:
            s.range(0, 3, 3).i32(v)  # raw int
    return s.data()


VALIDATE = {
    "valid-bf16-call": validate_seed(),
    "args-null": Stream().u8(0xFF).data(),
    "status-string-of-14": Stream().u8(0xFE).range(0, 2, 2).i32(14).data(),
    "struct-size-8": validate_seed(struct_size=8),
    "struct-size-plus-8": validate_seed(struct_size=ARGS_SIZE + 8),
    "fp16-in-fp32-out-row-scale": validate_seed({"a_dtype": 2, "b_dtype": 2, "c_dtype": 3, "epilogue": 2,
                                                 "row_scale": 0x70000}),
    "b-dtype-differs": validate_seed({"b_dtype": 2}),
    "m-2p31": validate_seed({"m": 2**31}),
    "m-zero-null-pointers": validate_seed({"m": 0, "a": 0, "b": 0, "c": 0, "a_offsets": 0}),
    "k-12": validate_seed({"k": 12}),
    "n-negative": validate_seed({"n": -8}),
    "b-elements-overflow": validate_seed({"num_experts": 2**31 - 1, "n": 2**31 - 8, "k": 2**31 - 8}),
    "planes-3m-past-2p31": validate_seed({"m": 715827883, "splits": (8, 16)}),
    "planes-valid": validate_seed({"splits": (128, 192)}),
    "planes-split1-past-n": validate_seed({"splits": (8, 264)}),
    "a-misaligned-8": validate_seed({"a": 0x10008}),
    "expert-ids-misaligned-2": validate_seed({"expert_ids": 0x50002}),
    "row-scale-null": validate_seed({"epilogue": 2, "row_scale": 0}),
    "num-groups-65537": validate_seed({"num_groups": 65537}),
    "num-groups-65536": validate_seed({"num_groups": 65536}),
    "max-rows-negative": validate_seed({"max_rows_per_group": -1}),
    "transpose-b-2": validate_seed({"transpose_b": 2}),
    "config-tile-m-256": validate_seed(config=[128, 256, 64, 64, 256, 16, 1, 1, 1, 0, 128, 128]),
    "config-cta-group-2": validate_seed(config=[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]),
    "struct-size-010": validate_seed(struct_size=ARGS_SIZE_010),
    "struct-size-010-group-ends-ignored": validate_seed({"group_ends": 0x40004}, struct_size=ARGS_SIZE_010),
    "group-ends": validate_seed({"group_ends": 0x40004}),
    "group-ends-and-a-offsets": validate_seed({"group_ends": 0x40004, "keep_a_offsets": 1}),
    "group-ends-misaligned-2": validate_seed({"group_ends": 0x40002}),
    "group-ends-null-m-zero": validate_seed({"m": 0, "group_ends": 0}),
}


# ---- fuzz_reference -----------------------------------------------------------
def reference_seed(M, N, K, E, G, in_bf16, out_index, epi_index, transpose, splits, raw, threads, seed,
                   offsets=None, sizes=None, ids=(), stats0=0, active=None, group_ends=False):
    """offsets: G+1 raw uint32 (malformed); sizes: G-1 group sizes (well formed);
    group_ends: pass offsets[1:] as group_ends instead."""
    s = Stream()
    mult8 = N % 8 == 0 and K % 8 == 0
    s.range(0, 64, M).range(0, 3, 1 if mult8 else 0)
    if mult8:
        s.range(1, 8, N // 8).range(1, 8, K // 8)
    else:
        s.range(1, 64, N).range(1, 64, K)
    s.range(1, 4, E).range(1, 8, G).boolean(in_bf16).pick(3, out_index).pick(3, epi_index).boolean(transpose)
    s.boolean(splits is not None)
    if splits is not None:
        s.range(1, N, splits[0]).range(splits[0], N, splits[1])
    s.range(0, 4, 0 if raw else 1).boolean(threads).u64(seed)
    s.boolean(sizes is not None)
    if sizes is not None:
        for size in sizes:
            s.range(0, 24, size)
    else:
        for o in offsets:
            s.range(0, 5, 1).u32(o)  # raw uint32
    for e in ids:
        s.range(0, 7, 1).i32(e)  # raw int32
    s.u32(stats0)
    if active is None:
        s.range(0, 3, 2).range(0, G + 2, G)
    else:
        s.range(0, 3, 0).u32(active)
    s.boolean(group_ends)
    return s.data()


REFERENCE = {
    "moe-bf16-store": reference_seed(64, 64, 64, 4, 4, True, 0, 0, True, None, False, True, 1,
                                     sizes=[16, 16, 16], ids=[0, 1, 2, 3]),
    "planes-fp16-fp32-row-scale": reference_seed(48, 64, 32, 2, 3, False, 2, 2, False, (16, 40), False, True, 2,
                                                 sizes=[10, 20], ids=[1, 0, 1]),
    "accumulate-malformed-offsets": reference_seed(33, 24, 16, 3, 6, True, 1, 1, True, None, False, True, 3,
                                                   offsets=[5, 3, 40, 0xFFFFFFFF, 7, 33, 2**31],
                                                   ids=[-1, 3, 2**31 - 1, -2**31, 0, 2], active=0xFFFFFFFF),
    "odd-shapes-all-inactive": reference_seed(5, 13, 7, 1, 8, False, 0, 2, False, (3, 13), False, True, 4,
                                              sizes=[1, 0, 2, 0, 1, 0, 1], ids=[-1, 1, 5, -1, 64, 1, -7, 1]),
    "raw-bits-nan-inf": reference_seed(17, 40, 56, 4, 2, True, 2, 1, False, None, True, False, 5,
                                       sizes=[9], ids=[3, 0]),
    "m-zero": reference_seed(0, 8, 8, 1, 1, True, 0, 0, True, None, False, False, 6, sizes=[], ids=[0]),
    "active-past-groups": reference_seed(20, 16, 8, 2, 2, True, 0, 0, True, None, False, True, 7,
                                         offsets=[0, 20, 20], ids=[1, 0], active=3),
    "group-ends-moe": reference_seed(64, 64, 64, 4, 4, True, 0, 0, True, None, False, True, 8,
                                     sizes=[16, 0, 24], ids=[0, 1, 2, 3], group_ends=True),
    "group-ends-malformed": reference_seed(33, 24, 16, 3, 6, True, 1, 1, True, None, False, True, 9,
                                           offsets=[5, 3, 40, 0xFFFFFFFF, 7, 33, 2**31],
                                           ids=[-1, 3, 2**31 - 1, -2**31, 0, 2], active=5, group_ends=True),
}


# ---- findings: reproducers of open findings, kept OUT of the corpora ------------
# Each fails fuzz_validate when tests/fuzz/ubsan_known_findings.supp is not
# applied (UBSAN_OPTIONS=halt_on_error=1 BUILD/fuzz_validate FILE), until the
# library code is fixed. See tests/fuzz/README.md.
FINDINGS = {
    "ubsan-enum-load-a_dtype-4.bin": validate_seed({"a_dtype": 4}),
    "ubsan-enum-load-epilogue-7.bin": validate_seed({"epilogue": 7}),
    "ubsan-enum-load-status-string-99.bin": Stream().u8(0xFE).range(0, 2, 2).i32(99).data(),
}


def main():
    for name, seeds in (("validate", VALIDATE), ("reference", REFERENCE)):
        d = os.path.join(HERE, "corpus", name)
        os.makedirs(d, exist_ok=True)
        for seed_name, data in seeds.items():
            with open(os.path.join(d, "seed-" + seed_name), "wb") as f:
                f.write(data)
        print(f"{d}: {len(seeds)} seeds")
    d = os.path.join(HERE, "findings")
    os.makedirs(d, exist_ok=True)
    for name, data in FINDINGS.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{d}: {len(FINDINGS)} reproducers")


if __name__ == "__main__":
    main()
