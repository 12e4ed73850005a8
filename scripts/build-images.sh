#!/usr/bin/env bash
# Builds confgate's container images as archives, offline: no registry, no Docker daemon, no base image.
#
# Usage: scripts/build-images.sh [--quick | --debug] [OUT_DIR]        (default: target/images)
#
# --quick: no -policy image, and the release profile without LTO and with parallel codegen (a larger
# binary, built in a fraction of the time; same code, same behaviour).
# --debug: for the node suite in CI, which has just built the test binaries: no -policy image; the
# debug build's confgate (every feature), example component and pause, each with the shared
# libraries `ldd` names. Nothing is compiled but what the tests' build lacks; not for shipping.
#
# Writes, each importable with `ctr -n k8s.io images import`, `docker load -i` and
# `kind load image-archive`:
#   confgate.tar            IMAGE                     the default build (volume and API mode, https)
#   confgate-policy.tar     IMAGE-policy              + CEL content rules and `confgate policy`
#   example-component.tar   example-component:TAG     the manifests' example component
#   pause.tar               pause:TAG                 a pod sandbox, for a node with no registry
# where IMAGE is ${CONFGATE_IMAGE:-localhost/confgate/confgate}:VERSION and VERSION is Cargo.toml's.
# The binaries are the static ones scripts/build-static.sh makes, the Dockerfile's too: same user
# (65532), entrypoint and environment. Set CONFGATE_IMAGE to name your own registry's repository.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=no
debug=no
if [ "${1:-}" = --debug ]; then
  quick=yes
  debug=yes
  shift
elif [ "${1:-}" = --quick ]; then
  quick=yes
  shift
  export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1
fi
out="${1:-target/images}"
mkdir -p "$out"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
image="${CONFGATE_IMAGE:-localhost/confgate/confgate}"
repo="${image%/*}"
target_dir="${CARGO_TARGET_DIR:-target}"
target="$(uname -m)-unknown-linux-gnu"
rel="$target_dir/$target/release"

# SRC=/DEST pairs for a dynamically linked program: itself, then each library `ldd` names.
with_libs() {
  echo "$1=$2"
  ldd "$1" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i "=" $i }'
}
if [ "$debug" = yes ]; then
  cargo build --all-features --locked --bin confgate --bin component --example pause >&2
  rel="$target_dir/debug"
  bin="$rel/confgate"
  mapfile -t confgate_files < <(with_libs "$bin" /confgate)
  mapfile -t component_files < <(with_libs "$rel/component" /component)
  mapfile -t pause_files < <(with_libs "$rel/examples/pause" /pause)
else
  # The -policy binary first: both builds write target/.../release/confgate, so it is copied aside.
  if [ "$quick" = no ]; then
    policy_bin=$(scripts/build-static.sh --policy | tail -1)
    cp "$policy_bin" "$out/.confgate-policy"
  fi
  bin=$(scripts/build-static.sh --with-example | tail -1)
  RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$target" --example pause >&2
  confgate_files=("$bin=/confgate")
  component_files=("$rel/component=/component")
  pause_files=("$rel/examples/pause=/pause")
fi

# Kept in step with the Dockerfile's ENV (why: the Dockerfile says).
tunables="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072:glibc.malloc.arena_max=1"
labels=(--label org.opencontainers.image.title=confgate --label org.opencontainers.image.licenses=Apache-2.0
        --label "org.opencontainers.image.version=$version")
scripts/oci-image.py --out "$out/confgate.tar" --name "$image:$version" --entrypoint /confgate --cmd run \
  --env "$tunables" --port 9797 "${labels[@]}" "${confgate_files[@]}"
if [ "$quick" = no ]; then
  scripts/oci-image.py --out "$out/confgate-policy.tar" --name "$image:$version-policy" --entrypoint /confgate \
    --cmd run --env "$tunables" --port 9797 "${labels[@]}" "$out/.confgate-policy=/confgate"
fi
scripts/oci-image.py --out "$out/example-component.tar" --name "$repo/example-component:$version" \
  --entrypoint /component --cmd /etc/component/config --cmd 0.0.0.0:8080 "${component_files[@]}"
scripts/oci-image.py --out "$out/pause.tar" --name "$repo/pause:$version" --entrypoint /pause \
  "${pause_files[@]}"
rm -f "$out/.confgate-policy"
