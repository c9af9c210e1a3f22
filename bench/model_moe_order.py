#!/usr/bin/env python3
"""A fluid model of one persistent grouped-GEMM launch on the H200, to ask
what the order of the tile walk costs before spending GPU time on it
(NOTES v0.6, the Qwen3 Zipf row).

Model: 132 CTAs take tiles t = b, b + 132, ... of a linear order (the
kernel's: groups in order, bands of 8 row blocks, row block fastest). A tile
of 128 weight rows x tile_m tokens needs `compute` microseconds (calibrated:
the balanced Qwen3 gate_up row, all tiles 256 tokens, runs compute-bound at
321.7 us = 12 tiles per CTA) scaled by the narrow MMA width its rows need,
and DRAM bytes for the weight tile the first time any CTA touches it (later
row blocks of the same expert hit L2), plus the token rows the first time
their row block is touched. DRAM bandwidth (4.26 TB/s) is shared by
water-filling among the CTAs that are loading; a tile advances at the
slower of its compute rate and its data rate.

    python3 bench/model_moe_order.py            # the Zipf row, orders compared

It reproduces the measured rows to within the model's crudeness (printed
beside them) and predicts what an order interleaving compute-heavy and
weight-streaming groups would gain. A model, not a measurement: the kernel
has to show it.

Measured since (NOTES v0.21), and not in this model: a tile's time barely
follows its MMA width (traced at tile_m 128: 10.8 / 12.2 / 12.9 / 14.5 us
for 16 / 32 / 64 / 128 token rows: the stages' pace sets it), and the
Zipf row's weight traffic is not its limit (every group on one expert, the
weights in L2: 415-416 us against 420). Its predictions for that row (order,
balance: a dynamic walk in its best order measured level) did not hold.
"""
import heapq
import math

SMS = 132
DRAM = 4.26e6  # bytes per microsecond
T256 = 321.7 / 12  # us per 128 x 256 x 2048 tile (calibrated, see above)
BAND = 8


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return state, z ^ (z >> 31)


def zipf_rows(experts, total, seed):
    """bench/gpu_buffers.cpp route_rows(kZipf), transcribed."""
    order = list(range(experts))
    state = seed
    for i in range(experts - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    weight = [0.0] * experts
    for rank in range(experts):
        weight[order[rank]] = (rank + 1) ** -1.2
    wsum = sum(weight[order[r]] for r in range(experts))
    rows, rem, assigned = [0] * experts, [], 0
    for e in range(experts):
        share = total * weight[e] / wsum
        whole = math.floor(share)
        rows[e] = whole
        assigned += whole
        rem.append((share - whole, e))
    rem.sort(key=lambda x: -x[0])  # stable, as std::stable_sort
    for i in range(total - assigned):
        rows[rem[i][1]] += 1
    return rows


def tiles_in_order(groups, n, tile_m):
    """groups: [(expert, rows)] in walk order -> [(expert, row_block, col_block, rows)]."""
    col_blocks = (n + 127) // 128
    out = []
    for e, r in groups:
        rbs = (r + tile_m - 1) // tile_m
        for band0 in range(0, rbs, BAND):
            band_rows = min(BAND, rbs - band0)
            for i in range(band_rows * col_blocks):
                rb, cb = band0 + i % band_rows, i // band_rows
                out.append((e, rb, cb, min(tile_m, r - rb * tile_m)))
    return out


def mma_width(rows, tile_m):
    w = tile_m
    while w > 16 and rows <= w // 2:
        w //= 2
    return w


def simulate(order, n, k, tile_m, min_width_cost=16):
    """Launch time in us for the linear tile order `order`."""
    w_bytes = 128 * k * 2
    per_cta = [order[b::SMS] for b in range(SMS)]
    seen_w, seen_x = set(), set()
    pos = [0] * SMS
    # Current tile per CTA: [compute_left_us, bytes_left]
    cur = [None] * SMS

    def start(b):
        if pos[b] >= len(per_cta[b]):
            return None
        e, rb, cb, rows = per_cta[b][pos[b]]
        pos[b] += 1
        c = T256 * max(mma_width(rows, tile_m), min_width_cost) / 256 * k / 2048
        d = 0.0
        if (e, cb) not in seen_w:
            seen_w.add((e, cb))
            d += w_bytes
        if (e, rb) not in seen_x:
            seen_x.add((e, rb))
            d += rows * k * 2
        return [c, d, c, d]

    for b in range(SMS):
        cur[b] = start(b)
    t = 0.0
    dt = 0.1
    while any(x is not None for x in cur):
        # Water-fill DRAM among CTAs that still load: each wants the rate that
        # keeps its compute busy (bytes / compute time of the tile).
        want = {b: x[3] / x[2] for b, x in enumerate(cur) if x is not None and x[1] > 0}
        give, left, todo = {}, DRAM, sorted(want, key=lambda b: want[b])
        while todo:
            fair = left / len(todo)
            b = todo[0]
            if want[b] <= fair:
                give[b] = want[b]
                left -= want[b]
                todo.pop(0)
            else:
                for b in todo:
                    give[b] = fair
                todo = []
        for b, x in enumerate(cur):
            if x is None:
                continue
            # Progress is limited by the slower of compute and data.
            frac_c = dt / x[2]
            frac_d = (give.get(b, 0.0) * dt / x[3]) if x[3] > 0 else 1.0
            if x[1] <= 0:
                frac_d = 1.0
            f = min(frac_c, frac_d) if x[3] > 0 and x[1] > 0 else frac_c
            x[0] -= f * x[2]
            x[1] -= f * x[3]
            if x[0] <= 1e-9 and x[1] <= 1e-6:
                cur[b] = start(b)
        t += dt
    return t


def interleave_groups(groups, tile_m):
    """Alternates compute-heavy groups (>= tile_m rows, largest first) with
    runs of the others, in proportion to their counts."""
    heavy = sorted([g for g in groups if g[1] >= tile_m], key=lambda g: -g[1])
    light = [g for g in groups if g[1] < tile_m]
    out, i, j = [], 0, 0
    while i < len(heavy) or j < len(light):
        if i < len(heavy):
            out.append(heavy[i])
            i += 1
        for _ in range(max(1, len(light) // max(1, len(heavy)))):
            if j < len(light):
                out.append(light[j])
                j += 1
    return out


def interleave_tiles(order, heavy_experts):
    """Merges the heavy groups' tiles and the others' in proportion, so each
    wave of 132 tiles holds both kinds in the ratio of their counts."""
    h = [t for t in order if t[0] in heavy_experts]
    light = [t for t in order if t[0] not in heavy_experts]
    keyed = [((i + 0.5) / len(h), 0, t) for i, t in enumerate(h)]
    keyed += [((i + 0.5) / len(light), 1, t) for i, t in enumerate(light)]
    keyed.sort(key=lambda x: (x[0], x[1]))
    return [t for _, _, t in keyed]


def compute_only(groups, k, tile_m):
    """The launch if DRAM were free and the tiles spread evenly: MMA work
    (last row blocks at their power-of-two width) over the SMs."""
    col_blocks = (1536 + 127) // 128
    work = 0.0
    for _, r in groups:
        full = (r - 1) // tile_m
        width = full * tile_m + max(mma_width(r - full * tile_m, tile_m), 16)
        work += width / 256 * T256 * k / 2048 * col_blocks
    return work / SMS


def main():
    n, k, tile_m = 1536, 2048, 256
    balanced = [(e, 256) for e in range(128)]
    t_bal = simulate(tiles_in_order(balanced, n, tile_m), n, k, tile_m)
    print(f"balanced Qwen3 gate_up: model {t_bal:.0f} us (measured 321.7; the calibration point)")
    rows = zipf_rows(128, 32768, 0xB5E70005)
    groups = [(e, r) for e, r in enumerate(rows) if r > 0]
    heavy = {e for e, r in groups if r >= tile_m}
    print(f"zipf: {len(groups)} groups, {len(heavy)} with >= {tile_m} rows holding "
          f"{sum(r for e, r in groups if e in heavy)} of 32768 rows")
    base = tiles_in_order(groups, n, tile_m)
    print(f"  walk in expert order (the kernel's): {simulate(base, n, k, tile_m):.0f} us (measured 453.7)")
    print(f"  heavy groups interleaved with runs of light ones: "
          f"{simulate(tiles_in_order(interleave_groups(groups, tile_m), n, tile_m), n, k, tile_m):.0f} us")
    print(f"  tiles of both kinds merged in proportion: {simulate(interleave_tiles(base, heavy), n, k, tile_m):.0f} us")
    print(f"  compute only (no DRAM, perfect balance): {compute_only(groups, k, tile_m):.0f} us")
    flops = 2 * 32768 * n * k
    print(f"floor: compute {flops / 799e6:.0f} us at 799 TFLOP/s, weights {128 * n * k * 2 / DRAM:.0f} us")


if __name__ == "__main__":
    main()
