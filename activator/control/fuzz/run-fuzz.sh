#!/bin/sh
# Runs the request fuzzer for a bounded time. New inputs go to a scratch
# directory, so the seed corpus in the tree is only read.
set -eu
fuzzer=$1
seeds=$2
seconds=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    "$scratch" "$seeds"
