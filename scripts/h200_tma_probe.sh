#!/usr/bin/env bash
# The TMA probe (bench/tma_probe.cu) on the H200; see scripts/h200_probe.sh.
exec "$(dirname "$0")/h200_probe.sh" tma
