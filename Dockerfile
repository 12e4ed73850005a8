# syntax=docker/dockerfile:1
# confgate's image: one static binary in an otherwise empty image, running as a non-root UID.
#
#   docker build -t localhost/confgate/confgate:0.1.0 .                          # default features
#   docker build --target policy -t localhost/confgate/confgate:0.1.0-policy .    # + CEL content rules
#   docker build --target example-component -t localhost/confgate/example-component:0.1.0 .
#
# The default image (volume and API mode, https reload targets) is what the manifests and `confgate
# inject` use. The -policy image adds the `policy` feature: CEL content rules (--rule, confgate.io/rules)
# and `confgate policy`, 1.2 MiB more; the default image refuses any rule, saying it needs this one.
#
# scripts/build-static.sh builds the same binary without Docker.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not refetch them.
# Cargo reads every target Cargo.toml names (examples and benches included): each gets a stub.
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates/core/Cargo.toml ./crates/core/
RUN mkdir src examples benches crates/core/src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && touch crates/core/src/lib.rs \
    && for t in examples/component examples/demo examples/pause benches/reaction benches/fleet \
         benches/edit_to_running; do echo 'fn main() {}' > "$t.rs"; done \
    && cargo fetch --locked \
    && rm -rf src examples benches crates/core/src
COPY src ./src
COPY crates ./crates
COPY examples ./examples
COPY benches ./benches
# The build context has no .git: `confgate --version` names the commit given here
# (`--build-arg CONFGATE_GIT_COMMIT=$(git rev-parse HEAD)`), else `unknown`.
ARG CONFGATE_GIT_COMMIT=
ENV CONFGATE_GIT_COMMIT=${CONFGATE_GIT_COMMIT}
# glibc linked statically (+crt-static): the final image has no libc. The Rust target is the build
# machine's own, so a multi-platform build (linux/amd64, linux/arm64) builds natively on each platform.
# Two cargo runs: building an example enables dev-dependencies, whose features would otherwise be
# unified into confgate's own dependencies and make its binary larger (sizes: docs/performance.md).
RUN target="$(uname -m)-unknown-linux-gnu" \
    && export RUSTFLAGS="-C target-feature=+crt-static" \
    && cargo build --release --locked --offline --target "$target" --bin confgate --features policy \
    && cp "target/$target/release/confgate" /confgate-policy \
    && cargo build --release --locked --offline --target "$target" --bin confgate \
    && cargo build --release --locked --offline --target "$target" --bin component --features example-component \
    && for b in "target/$target/release/confgate" "target/$target/release/component" /confgate-policy; do \
         ldd "$b" 2>&1 | grep -Eq 'not a dynamic executable|statically linked' \
           || { echo "$b is not static" >&2; ldd "$b" >&2; exit 1; }; \
       done \
    && mkdir /out \
    && cp "target/$target/release/confgate" "target/$target/release/component" /confgate-policy /out/ \
    && /out/confgate --version

# The example component of manifests/ (not part of a release).
FROM scratch AS example-component
COPY --from=build /out/component /component
USER 65532:65532
ENTRYPOINT ["/component"]
CMD ["/etc/component/config", "0.0.0.0:8080"]

# confgate with CEL content rules and `confgate policy` (the `policy` feature): tag it VERSION-policy.
FROM scratch AS policy
LABEL org.opencontainers.image.title="confgate" \
      org.opencontainers.image.description="Lets a component run only a ConfigMap version it accepts (with CEL content rules)" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/confgate-policy /confgate
# glibc's allocator (linked in statically) keeps a freed 1 MiB config's buffers for reuse once its
# adaptive mmap threshold has grown: fixed thresholds hand them back, and one arena is enough for a
# loop, a judging thread and a reload thread. RSS after 1 MiB configs: 6.6 instead of 8.5 MiB.
ENV GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072:glibc.malloc.arena_max=1
USER 65532:65532
EXPOSE 9797
ENTRYPOINT ["/confgate"]
CMD ["run"]

# The default target: confgate itself. No shell, no package manager, no libc; only the binary.
FROM scratch
LABEL org.opencontainers.image.title="confgate" \
      org.opencontainers.image.description="Lets a component run only a ConfigMap version it accepts" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/confgate /confgate
# glibc's allocator (linked in statically) keeps a freed 1 MiB config's buffers for reuse once its
# adaptive mmap threshold has grown: fixed thresholds hand them back, and one arena is enough for a
# loop, a judging thread and a reload thread. RSS after 1 MiB configs: 6.6 instead of 8.5 MiB.
ENV GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072:glibc.malloc.arena_max=1
USER 65532:65532
EXPOSE 9797
ENTRYPOINT ["/confgate"]
CMD ["run"]
