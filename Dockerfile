# Multi-stage build of kubectl-runner: a static musl binary on a distroless
# base, running as a non-root user. The same image runs the in-cluster manager
# (`run-manager`, see manifests/manager.yaml) and any other subcommand.
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release --locked --target x86_64-unknown-linux-musl --bin kubectl-runner

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/kubectl-runner /kubectl-runner
USER 65532:65532
ENTRYPOINT ["/kubectl-runner"]
CMD ["run-manager", "--leader-elect"]
