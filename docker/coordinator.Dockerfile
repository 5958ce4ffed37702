# syntax=docker/dockerfile:1
# Coordinator image: ringmaster-coordinator and the ringmaster CLI, no CUDA.
#   docker build -f docker/coordinator.Dockerfile -t ringmaster/coordinator:0.1.0 .
# Build stage: Debian bookworm, dependencies from scripts/setup.sh (the same script developers
# and CI run), a portable (-march not native) Release build of the two binaries.
ARG DEBIAN_RELEASE=bookworm

FROM debian:${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY scripts/setup.sh scripts/requirements-test.txt scripts/
RUN RINGMASTER_SETUP_PYTHON=0 RINGMASTER_SETUP_TESTS=0 scripts/setup.sh \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DRINGMASTER_NATIVE=OFF -DRINGMASTER_CUDA=OFF \
 && ninja -C /build ringmaster-coordinator ringmaster \
 && mkdir -p /out/bin \
 && cp /build/coordinator/ringmaster-coordinator /build/cli/ringmaster /out/bin/ \
 && strip /out/bin/* \
 && docker/runtime-packages.sh /out/bin/* > /out/runtime-packages.txt

# Runtime stage: the shared libraries the binaries link (as found by runtime-packages.sh), a
# non-root user, nothing else.
FROM debian:${DEBIAN_RELEASE}-slim
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 ringmaster \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ringmaster --create-home \
      --shell /usr/sbin/nologin ringmaster
COPY --from=build /out/bin/ /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/ringmaster
VOLUME ["/var/lib/ringmaster"]
# gRPC, and /metrics (--metrics-listen: Prometheus scrape job "ringmaster-coordinator").
EXPOSE 7070 9400
ENTRYPOINT ["/usr/local/bin/ringmaster-coordinator"]
# TLS is required off loopback (docs/operations.md, "Security"): mount the certificate, key, CA
# and tokens at /etc/ringmaster/credentials (as k8s/ and helm/ do), or pass your own flags.
CMD ["--listen", "0.0.0.0:7070", "--db", "/var/lib/ringmaster/jobs.db", \
     "--metrics-listen", "0.0.0.0:9400", "--metrics-insecure-public", \
     "--tls-cert", "/etc/ringmaster/credentials/tls.crt", \
     "--tls-key", "/etc/ringmaster/credentials/tls.key", \
     "--tls-client-ca", "/etc/ringmaster/credentials/ca.crt", \
     "--join-token-file", "/etc/ringmaster/credentials/join-token", \
     "--submit-token-file", "/etc/ringmaster/credentials/submit-token"]
