#!/bin/sh
# Runs one fuzz target for a while from the kept corpus plus the seeds, then minimises the corpus.
# Usage: fuzz/run.sh TARGET [SECONDS]   (needs: rustup toolchain nightly, cargo install cargo-fuzz)
set -eu
cd "$(dirname "$0")"
target=$1
secs=${2:-180}
mkdir -p corpus/"$target"
cargo +nightly fuzz run "$target" corpus/"$target" seeds/"$target" -- \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1
# Keep only inputs that add coverage.
cargo +nightly fuzz cmin "$target" corpus/"$target"
