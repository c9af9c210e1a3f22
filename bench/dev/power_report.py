#!/usr/bin/env python3
"""Reads the files of bench/dev/lib/power_sampled_run.sh (power_<tag>.{csv,json}:
power.sh tags them <impl>_<round>)
and prints, per tag: the row's median time and TFLOP/s,
the mean SM clock and power over the samples of the row's own window, and
TFLOP/s per GHz and per kW.

The window: each process first measures the ceilings (a few seconds of
cuBLAS GEMMs and copies), then runs the row; the row's window is taken as
the last `time x calls` seconds before the process's last sample, from the
benchmark's own count of calls and their median time (flushes between
calls make the true window a little longer; its first samples are dropped
too, so the clock has settled).

    python3 bench/dev/power_report.py OUT_DIR ROW
"""
import csv
import datetime
import glob
import json
import os
import sys


def samples(path):
    rows = []
    for r in csv.reader(open(path)):
        if len(r) < 3:
            continue
        try:
            t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rows.append((t, float(r[1]), float(r[2])))
        except ValueError:
            continue  # a header or a reading the driver did not have
    return rows


def row_figures(path):
    data = json.load(open(path))
    for b in data["benchmarks"]:
        if b.get("aggregate_name") == "median":
            # An aggregate's "iterations" counts repetitions; the calls per
            # repetition are in its name (".../iterations:20/...").
            per_rep = int(b["run_name"].split("iterations:")[1].split("/")[0])
            return b["us_median"], b["TFLOP/s"], b["repetitions"] * per_rep
    return None


def main(out, row):
    print(f"row {row}")
    print("| impl, round | us | TFLOP/s | SM MHz | W | TFLOP/s per GHz | TFLOP/s per kW | samples |")
    print("|---|---|---|---|---|---|---|---|")
    for js in sorted(glob.glob(os.path.join(out, "power_*.json"))):
        tag = os.path.basename(js)[len("power_"):-len(".json")]
        fig = row_figures(js)
        s = samples(os.path.join(out, f"power_{tag}.csv"))
        if not fig or not s:
            print(f"| {tag} | no data | | | | | | |")
            continue
        us, tflops, calls = fig
        end = s[-1][0]
        span = us * 1e-6 * calls
        start = end - 0.8 * span  # the window's last 80%
        win = [x for x in s if start <= x[0] <= end]
        if not win:
            print(f"| {tag} | {us:.1f} | {tflops:.0f} | window too short for 50 ms samples | | | | 0 |")
            continue
        mhz = sum(x[1] for x in win) / len(win)
        watts = sum(x[2] for x in win) / len(win)
        print(f"| {tag} | {us:.1f} | {tflops:.0f} | {mhz:.0f} | {watts:.0f} | {tflops / (mhz / 1000):.0f} | "
              f"{tflops / (watts / 1000):.0f} | {len(win)} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
