# The "_median" aggregate rows of a Google Benchmark console log (every ggemm
# benchmark reports us_median), printed as "LABEL NAME MEDIAN" with the
# iterations/repeats suffix dropped. Used by ab_bench.sh:
#   awk -v l=LABEL -f bench/dev/lib/median_rows.awk LOG
$1 ~ /_median$/ {sub(/\/iterations:[0-9]+\/repeats:[0-9]+\/manual_time_median/, "", $1); print l, $1, $2}
