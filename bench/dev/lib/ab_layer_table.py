#!/usr/bin/env python3
"""The layer A/B's table: LABEL=JSON arguments (bench/moe_layer.py --json of
each variant and round); per row the median over rounds of each variant's
layer time in each mode the JSON has (sustained, steady, cold), its
sustained (else steady) ratio to A, and A's ratios to the torch layer and to
ggemm's two GEMMs where A's first round timed them."""
import json
import statistics
import sys
from collections import defaultdict

MODES = ("sustained", "steady", "cold")


def main(args):
    times = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # row -> label -> mode -> [us]
    anchors = {}
    labels, modes = [], []
    for arg in args:
        label, path = arg.split("=", 1)
        if label not in labels:
            labels.append(label)
        for row in json.load(open(path))["rows"]:
            key = (row["model"], row["tokens"], row["routing"])
            for mode in MODES:
                if f"layer_{mode}_us" in row:
                    times[key][label][mode].append(row[f"layer_{mode}_us"])
                    if mode not in modes:
                        modes.append(mode)
            for mode in MODES:  # the anchors of the first back-to-back mode the row has
                if f"torch_{mode}_us" in row and mode != "cold" and key not in anchors:
                    anchors[key] = (row[f"torch_{mode}_us"], row.get(f"gemms_{mode}_us"), mode)
    modes.sort(key=MODES.index)
    ratio_mode = next((m for m in modes if m != "cold"), modes[0] if modes else "sustained")
    head = ["model", "tokens", "routing"]
    for label in labels:
        head += [f"{label} {m} us" for m in modes] + ([f"{label} / A ({ratio_mode})"] if label != "A" else [])
    head += ["A vs torch", "A / gemms"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, by_label in times.items():
        cells = [key[0], str(key[1]), key[2]]
        med = {(l, m): statistics.median(v) for l, d in by_label.items() for m, v in d.items() if v}
        a = med.get(("A", ratio_mode))
        for label in labels:
            cells += [f"{med[(label, m)]:.1f}" if (label, m) in med else "-" for m in modes]
            if label != "A":
                b = med.get((label, ratio_mode))
                cells.append(f"{b / a:.3f}" if b and a else "-")
        torch_us, gemms_us, mode = anchors.get(key, (None, None, None))
        a_anchor = med.get(("A", mode)) if mode else None
        cells += [f"{torch_us / a_anchor:.2f}x" if torch_us and a_anchor else "-",
                  f"{a_anchor / gemms_us:.2f}" if gemms_us and a_anchor else "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
