#!/usr/bin/env python3
"""The layer A/B's table: LABEL=JSON arguments (bench/moe_layer.py --json of
each variant and round); per row the median over rounds of each variant's
layer time, sustained and cold, its ratio to A, and A's ratios to the torch
layer and to ggemm's two GEMMs where A's first round timed them."""
import json
import statistics
import sys
from collections import defaultdict


def main(args):
    times = defaultdict(lambda: defaultdict(lambda: {"sustained": [], "cold": []}))
    anchors = {}
    labels = []
    for arg in args:
        label, path = arg.split("=", 1)
        if label not in labels:
            labels.append(label)
        for row in json.load(open(path))["rows"]:
            key = (row["model"], row["tokens"], row["routing"])
            for mode in ("sustained", "cold"):
                times[key][label][mode].append(row[f"layer_{mode}_us"])
            if "torch_sustained_us" in row and key not in anchors:
                anchors[key] = (row["torch_sustained_us"], row["gemms_sustained_us"])
    head = ["model", "tokens", "routing"]
    for label in labels:
        head += [f"{label} sustained us", f"{label} cold us"] + ([f"{label} / A"] if label != "A" else [])
    head += ["A vs torch", "A / gemms"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, by_label in times.items():
        cells = [key[0], str(key[1]), key[2]]
        a = statistics.median(by_label["A"]["sustained"]) if by_label["A"]["sustained"] else None
        for label in labels:
            s, c = by_label[label]["sustained"], by_label[label]["cold"]
            ms = statistics.median(s) if s else None
            cells += [f"{ms:.1f}" if ms else "-", f"{statistics.median(c):.1f}" if c else "-"]
            if label != "A":
                cells.append(f"{ms / a:.3f}" if ms and a else "-")
        torch_us, gemms_us = anchors.get(key, (None, None))
        cells += [f"{torch_us / a:.2f}x" if torch_us and a else "-", f"{a / gemms_us:.2f}" if gemms_us and a else "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
