#!/bin/sh
# Builds every fuzz target and runs each once over its kept seeds (no fuzzing), so the targets never rot
# against the library and no seed regresses. With nightly and cargo-fuzz it is the real instrumented
# build; otherwise the same targets build on stable as plain libFuzzer binaries (no coverage feedback,
# which only fuzzing itself needs), in the main target dir so the dependencies built there are reused.
set -eu
cd "$(dirname "$0")"
targets="annotations version manifests"
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly fuzz build --dev
  bin=target/x86_64-unknown-linux-gnu/debug
else
  echo "fuzz/build.sh: no nightly cargo-fuzz; building the targets on stable" >&2
  cargo build --locked --target-dir ../target
  bin=../target/debug
fi
for t in $targets; do
  "$bin/$t" -runs=0 "seeds/$t"
done
