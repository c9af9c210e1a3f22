# One line per benchmark from median_rows.awk's "LABEL NAME MEDIAN" lines (in
# run order): the name, then each label's medians in turn, so variants run
# alternately in the same session read side by side.
{key = $2; v[key, $1] = v[key, $1] " " $3
 if (!(key in seen)) {seen[key]; order[++n] = key}
 if (!($1 in lab)) {lab[$1]; labs[++nl] = $1}}
END {for (i = 1; i <= n; ++i) {line = sprintf("%-60s", order[i])
       for (j = 1; j <= nl; ++j) line = line sprintf(" %s:%s", labs[j], v[order[i], labs[j]]); print line}}
