#!/usr/bin/env bash
# Builds the same static confgate binary the Dockerfile puts in its image, checks it is static, prints its size.
#
# Usage: scripts/build-static.sh [--with-example] [--policy]
#   --with-example  also build examples/component.rs the same way (the image's example component)
#   --policy        the -policy image's binary: the default features plus CEL content rules
# Honours CARGO_TARGET_DIR. Prints the binary's path on the last line of stdout.
set -euo pipefail

cd "$(dirname "$0")/.."

arch="$(uname -m)"
target="${arch}-unknown-linux-gnu"
target_dir="${CARGO_TARGET_DIR:-target}"
extra=()
features=()
for arg in "$@"; do
    case "$arg" in
        --with-example) extra=(--bin component --features example-component) ;;
        --policy) features=(--features policy) ;;
        *) echo "build-static: unknown argument $arg (--with-example, --policy)" >&2; exit 64 ;;
    esac
done

# glibc linked statically: the image is FROM scratch, so there is no libc to load at run time.
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"
cargo build --release --locked --target "$target" --bin confgate "${features[@]}" >&2
# Separately: the component is its own binary target, built only when asked for.
if [[ ${#extra[@]} -gt 0 ]]; then
    cargo build --release --locked --target "$target" "${extra[@]}" >&2
fi

bin="$target_dir/$target/release/confgate"
bins=("$bin")
if [[ ${#extra[@]} -gt 0 ]]; then
    bins+=("$target_dir/$target/release/component")
fi

for b in "${bins[@]}"; do
    # ldd says "not a dynamic executable" (older glibc) or "statically linked" (newer) for a static binary.
    if ! ldd "$b" 2>&1 | grep -Eq 'not a dynamic executable|statically linked'; then
        echo "build-static: $b is not static:" >&2
        ldd "$b" >&2 || true
        exit 1
    fi
    size=$(stat -c %s "$b")
    echo "build-static: $b is static, $size bytes ($(( (size + 1023) / 1024 )) KiB)" >&2
done
echo "$bin"
