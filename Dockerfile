# Multi-stage build of kubectl-runner: a static binary on an empty base,
# running as a non-root user. The same image runs the in-cluster manager
# (`run-manager`, see manifests/manager.yaml) and any other subcommand.
#
# scripts/image.sh builds the same image without Docker: it runs the build
# stage's cargo command on the host and reads the runtime stage below (base,
# user, entrypoint, command) from this file, so keep that stage in this form.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# glibc, linked statically: one binary that needs nothing from the image. It
# reaches the apiserver by the IP in KUBERNETES_SERVICE_HOST, so glibc's
# run-time NSS lookups (unavailable when static) are never needed.
RUN RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked --target x86_64-unknown-linux-gnu --bin kubectl-runner

# Nothing but the binary: the in-cluster client trusts the ServiceAccount's
# CA bundle, mounted into the Pod, and needs no /etc.
FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/kubectl-runner /kubectl-runner
USER 65532:65532
ENTRYPOINT ["/kubectl-runner"]
CMD ["run-manager", "--leader-elect"]
