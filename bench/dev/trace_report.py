#!/usr/bin/env python3
"""Summarises a kernel event trace (GGEMM_TRACE_FILE of a -DGGEMM_TRACE=ON
build; the format is in runtime/trace.h and ptx/blocks/trace.h).

    GGEMM_TRACE_FILE=/tmp/t.bin GGEMM_TRACE_SKIP=4 build-trace/bench/ggemm_bench \\
        --benchmark_filter='lora_shrink.*m4096_g8_r16/ggemm/'
    python3 bench/dev/trace_report.py /tmp/t.bin

Per traced launch, in ns (cycles converted per CTA with the %globaltimer
stamps of each role's first and last event):
  span        the launch from the first CTA's start to the last CTA's end,
              and how far apart the CTAs started
  load trip   per stage, consumer 0's full-barrier pass minus the producer's
              issue of that stage (one SM, one clock): the TMA round trip
              plus any wait for a free stage is NOT in it (the issue event
              follows the empty-barrier wait)
  starved     per stage, consumer 0's full-barrier pass minus its event
              just before (a release, the previous pass, a tile's start):
              time the consumer waited for data
  issue gap   per stage, the producer's issue minus its issue before
  mainloop / epilogue  per tile, consumer 0
  ahead       stages issued but not yet passed by consumer 0, sampled at
              each issue
`--cta N` also prints CTA N's events in order (ns from its consumer 0's
start), `--self-test` checks the arithmetic on a synthetic trace.
"""
import bisect
import statistics
import struct
import sys
import tempfile

HEADER = struct.Struct("<8s96s8I")
START, GLOBALTIMER, ISSUE, FULL, RELEASE, TILE, EPILOGUE, EPILOGUE_END, END = range(1, 10)


def read_launches(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        magic, kernel, grid, roles, events, tile_m, tile_n, stages, k, swizzle = HEADER.unpack_from(data, pos)
        if magic != b"GGTRACE1":
            raise ValueError(f"{path}: bad record at byte {pos}")
        pos += HEADER.size
        words = grid * roles * events * 2
        values = struct.unpack_from(f"<{words}Q", data, pos)
        pos += words * 8
        ctas = []
        for cta in range(grid):
            per_role = []
            for role in range(roles):
                base = (cta * roles + role) * events * 2
                evs = []
                for i in range(events):
                    v, tag = values[base + 2 * i], values[base + 2 * i + 1]
                    if tag == 0:
                        continue
                    evs.append((tag >> 32, tag & 0xFFFFFFFF, v))
                per_role.append(evs)
            ctas.append(per_role)
        yield dict(kernel=kernel.split(b"\0")[0].decode(), grid=grid, tile_m=tile_m, tile_n=tile_n, stages=stages,
                   k=k, swizzle=swizzle, ctas=ctas)


def clock_model(evs):
    """(cycle0, ns0, ns per cycle) from the role's first and last stamped events."""
    stamps = [(evs[i][2], evs[i + 1][2]) for i in range(len(evs) - 1) if evs[i + 1][0] == GLOBALTIMER]
    if len(stamps) < 2 or stamps[-1][0] == stamps[0][0]:
        return None
    (c0, t0), (c1, t1) = stamps[0], stamps[-1]
    return c0, t0, (t1 - t0) / (c1 - c0)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def summarise(launch):
    trips, starved, gaps, mains, epis, ahead = [], [], [], [], [], []
    starts, ends = [], []
    for roles in launch["ctas"]:
        prod, cons = roles[0], roles[1] if len(roles) > 1 else []
        model = clock_model(cons) or clock_model(prod)
        if not model:
            continue
        c0, t0, ns_per_cycle = model
        to_ns = lambda c: (c - c0) * ns_per_cycle
        for evs in roles:
            stamps = [evs[i + 1][2] for i in range(len(evs) - 1) if evs[i + 1][0] == GLOBALTIMER]
            if stamps:
                starts.append(stamps[0])
                ends.append(stamps[-1])
        issue = {a: c for kind, a, c in prod if kind == ISSUE}
        full = {a: c for kind, a, c in cons if kind == FULL}
        for s, c in full.items():
            if s in issue:
                trips.append(to_ns(c) - to_ns(issue[s]))
        timed = [e for e in cons if e[0] != GLOBALTIMER]
        starved += [to_ns(c) - to_ns(timed[i - 1][2]) for i, (kind, _, c) in enumerate(timed) if kind == FULL and i > 0]
        seqs = sorted(issue)
        gaps += [to_ns(issue[b]) - to_ns(issue[a]) for a, b in zip(seqs, seqs[1:])]
        full_times = sorted(full.values())
        for s in seqs:
            ahead.append(s + 1 - bisect.bisect_right(full_times, issue[s]))
        tile_start = None
        for kind, a, c in cons:
            if kind == TILE:
                tile_start = c
            elif kind == EPILOGUE and tile_start is not None:
                mains.append(to_ns(c) - to_ns(tile_start))
                epi_start = c
            elif kind == EPILOGUE_END:
                epis.append(to_ns(c) - to_ns(epi_start))
    out = dict(kernel=launch["kernel"], grid=launch["grid"], tile=f"{launch['tile_n']}x{launch['tile_m']}",
               stages=launch["stages"], k=launch["k"])
    if starts:
        out["span_ns"] = max(ends) - min(starts)
        out["start_skew_ns"] = max(starts) - min(starts)
    for name, xs in (("load_trip_ns", trips), ("starved_ns", starved), ("issue_gap_ns", gaps),
                     ("mainloop_ns", mains), ("epilogue_ns", epis), ("ahead_stages", ahead)):
        if xs:
            out[name] = (pct(xs, 0.1), statistics.median(xs), pct(xs, 0.9), len(xs))
    return out


def print_summary(s):
    print(f"{s['kernel']}: grid {s['grid']}, tile {s['tile']} (features x tokens), {s['stages']} stages, K {s['k']}")
    if "span_ns" in s:
        print(f"  span {s['span_ns'] / 1e3:.2f} us, CTA start skew {s['start_skew_ns'] / 1e3:.2f} us")
    for name in ("load_trip_ns", "starved_ns", "issue_gap_ns", "mainloop_ns", "epilogue_ns", "ahead_stages"):
        if name in s:
            lo, mid, hi, n = s[name]
            print(f"  {name:14s} p10 {lo:10.1f}  median {mid:10.1f}  p90 {hi:10.1f}  (n {n})")


def self_test():
    """A 2-CTA trace with a 1.5 ns/cycle clock: every stage's load trip is 600
    cycles (900 ns); the consumer passes a barrier every 800 cycles and
    releases the stage before 50 cycles later, so it waits 750 cycles
    (1125 ns) per stage."""
    grid, roles, events = 2, 3, 64
    words = [0] * (grid * roles * events * 2)

    def put(cta, role, i, kind, arg, value):
        base = (cta * roles + role) * events * 2
        words[base + 2 * i], words[base + 2 * i + 1] = value, kind << 32 | arg

    for cta in range(grid):
        c = 1000 * cta
        prod, cons = [], []
        prod += [(START, 0, c), (GLOBALTIMER, 0, int(c * 1.5))]
        cons += [(START, 0, c), (GLOBALTIMER, 0, int(c * 1.5)), (TILE, 0, c)]
        for s in range(4):
            issue = c + 100 + 800 * s
            prod.append((ISSUE, s, issue))
            cons.append((FULL, s, issue + 600))
            if s > 0:
                cons.append((RELEASE, s - 1, issue + 650))
        cons += [(RELEASE, 3, c + 100 + 2400 + 700), (EPILOGUE, 0, c + 4000), (EPILOGUE_END, 0, c + 5000)]
        end = c + 6000
        prod += [(END, 10, end), (GLOBALTIMER, 0, int(end * 1.5))]
        cons += [(END, 10, end), (GLOBALTIMER, 0, int(end * 1.5))]
        for role, evs in ((0, prod), (1, cons)):
            for i, (kind, arg, value) in enumerate(evs):
                put(cta, role, i, kind, arg, value)
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
        f.write(HEADER.pack(b"GGTRACE1", b"self_test", grid, roles, events, 16, 128, 4, 256, 128))
        f.write(struct.pack(f"<{len(words)}Q", *words))
        path = f.name
    (launch,) = list(read_launches(path))
    s = summarise(launch)
    checks = {"load_trip_ns": 900.0, "starved_ns": 1125.0, "issue_gap_ns": 1200.0, "mainloop_ns": 6000.0,
              "epilogue_ns": 1500.0}
    for name, want in checks.items():
        got = s[name][1]
        assert abs(got - want) < 1e-6, f"{name}: {got}, want {want}"
    assert s["span_ns"] == int(7000 * 1.5), s["span_ns"]
    assert s["start_skew_ns"] == 1500, s["start_skew_ns"]
    print_summary(s)
    print_timeline(launch, 1)
    print("self-test passed")


NAMES = {START: "start", ISSUE: "issue", FULL: "full", RELEASE: "release", TILE: "tile", EPILOGUE: "epilogue",
         EPILOGUE_END: "epilogue end", END: "end"}


def print_timeline(launch, cta):
    roles = launch["ctas"][cta]
    model = clock_model(roles[1]) or clock_model(roles[0])
    if not model:
        print(f"  CTA {cta}: no events")
        return
    c0, _, ns_per_cycle = model
    merged = sorted((c, role, kind, arg) for role, evs in enumerate(roles) for kind, arg, c in evs
                    if kind != GLOBALTIMER)
    print(f"  CTA {cta} timeline (ns; role 0 producer, 1-2 consumers):")
    for c, role, kind, arg in merged:
        print(f"    {(c - c0) * ns_per_cycle:10.1f}  role {role}  {NAMES.get(kind, kind):12s} {arg}")


def main(argv):
    args = argv[1:]
    if args == ["--self-test"]:
        self_test()
        return
    cta = None
    if len(args) == 3 and args[1] == "--cta":
        cta = int(args[2])
        args = args[:1]
    if len(args) != 1:
        sys.exit(__doc__)
    for launch in read_launches(args[0]):
        print_summary(summarise(launch))
        if cta is not None and cta < launch["grid"]:
            print_timeline(launch, cta)


if __name__ == "__main__":
    main(sys.argv)
