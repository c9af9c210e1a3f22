#!/usr/bin/env python3
"""ab_libs.sh's table: LABEL=JSON arguments (bench/compare_torch.py,
bench/dev/layer_rows.py or bench/moe_layer.py --json output of each library
and round). Per row and mode (sustained, steady, cold): each library's median over
its rounds, its ratio to the first library's, and the anchor's (torch's
grouped_mm or torch layer, where the JSON has it) time over each library's.
"""
import json
import statistics
import sys
from collections import defaultdict

MODES = ("sustained", "steady", "cold")


def rows_of(path):
    """(row name, {mode: ggemm us}, {mode: anchor us}) of one JSON file."""
    for r in json.load(open(path))["rows"]:
        if "row" in r:  # compare_torch.py, layer_rows.py
            name, ours, theirs = f"{r['row']} ({r['data']})", "ggemm_{}_us", "torch_{}_us"
        else:  # moe_layer.py
            name, ours, theirs = f"layer {r['model']} {r['tokens']} tokens {r['routing']}", "layer_{}_us", "torch_{}_us"
        yield (name, {m: r[ours.format(m)] for m in MODES if ours.format(m) in r},
               {m: r[theirs.format(m)] for m in MODES if theirs.format(m) in r})


def main(args):
    if not args:
        sys.exit("usage: ab_libs_table.py LABEL=JSON [LABEL=JSON ...]")
    times = defaultdict(lambda: defaultdict(list))    # (row, mode) -> label -> [us]
    anchors = defaultdict(lambda: defaultdict(list))  # (row, mode) -> label -> [anchor us]
    labels, order = [], []
    for arg in args:
        label, path = arg.split("=", 1)
        if label not in labels:
            labels.append(label)
        for name, ours, theirs in rows_of(path):
            for mode in MODES:
                if mode not in ours and mode not in theirs:
                    continue  # a benchmark that does not time this mode (layer_rows.py: no steady)
                key = (name, mode)
                if key not in order:
                    order.append(key)
                if mode in ours:
                    times[key][label].append(ours[mode])
                if mode in theirs:
                    anchors[key][label].append(theirs[mode])
    first = labels[0]
    head = ["row", "mode"] + [f"{l} us" for l in labels] + [f"{l} / {first}" for l in labels[1:]]
    head += [f"anchor / {l}" for l in labels]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in sorted(order, key=lambda k: (k[0], MODES.index(k[1]))):
        med = {l: statistics.median(v) for l, v in times[key].items() if v}
        cells = [key[0], key[1]]
        cells += [f"{med[l]:.1f} (n={len(times[key][l])})" if l in med else "-" for l in labels]
        cells += [f"{med[l] / med[first]:.3f}" if l in med and first in med else "-" for l in labels[1:]]
        for l in labels:
            a = anchors[key].get(l)
            cells.append(f"{statistics.median(a) / med[l]:.3f}x" if a and l in med else "-")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
