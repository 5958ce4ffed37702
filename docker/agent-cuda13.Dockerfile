# syntax=docker/dockerfile:1
# Agent image: ringmaster-agent, ringmaster-trainer (CUDA), ringmaster-trainer-launch and the
# ringmaster CLI on NVIDIA's CUDA runtime base.
#   agent-cuda13.Dockerfile: CUDA 13, Turing (sm_75) and newer.
#   agent-cuda12.Dockerfile: CUDA 12, also Pascal (sm_61, P40) and Volta (sm_70, V100).
# The two files differ only in the ARG defaults below (tests/deploy_docker.sh checks it).
#   docker build -f docker/agent-cuda13.Dockerfile -t ringmaster/agent:0.1.0-cuda13 .
# NVIDIA publishes CUDA images on Ubuntu, so both stages are Ubuntu 24.04; scripts/setup.sh's
# apt package names are the same there (universe).
ARG CUDA_VERSION=13.0.0
ARG CUDA_ARCHITECTURES="75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"
ARG UBUNTU_RELEASE=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU_RELEASE} AS build
ARG CUDA_ARCHITECTURES
WORKDIR /src
COPY scripts/setup.sh scripts/requirements-test.txt scripts/
RUN RINGMASTER_SETUP_PYTHON=0 RINGMASTER_SETUP_TESTS=0 scripts/setup.sh \
 && rm -rf /var/lib/apt/lists/*
COPY . .
# The real CUDA trainer (nvcc, real NCCL), said explicitly: the build has no GPU, and the
# emulator (RINGMASTER_CUDA_EMU) is for tests only. tests/deploy_cuda_configure.sh runs this
# configure line (parsed from here) and checks the result.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRINGMASTER_NATIVE=OFF \
      -DRINGMASTER_CUDA=ON -DRINGMASTER_CUDA_EMU=OFF \
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && ninja -C /build ringmaster-agent ringmaster-trainer ringmaster \
 && mkdir -p /out/bin \
 && cp /build/agent/ringmaster-agent /build/trainer/ringmaster-trainer /build/cli/ringmaster /out/bin/ \
 && strip /out/bin/* \
 && install -m 0755 scripts/trainer-launch.sh /out/bin/ringmaster-trainer-launch \
 && docker/runtime-packages.sh /out/bin/ringmaster-agent /out/bin/ringmaster-trainer /out/bin/ringmaster \
      > /out/runtime-packages.txt

# Runtime stage: CUDA runtime base (cudart, cuBLAS, NCCL), the other shared libraries the
# binaries link (runtime-packages.sh), a non-root user.
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU_RELEASE}
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 ringmaster \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ringmaster --create-home \
      --shell /usr/sbin/nologin ringmaster \
 && mkdir -p /etc/ringmaster \
 && touch /etc/ringmaster/trainer.env
COPY --from=build /out/bin/ /usr/local/bin/
# The device plugin sets NVIDIA_VISIBLE_DEVICES per pod; these make the driver's compute and
# utility libraries (nvidia-smi) appear in the container.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    HOME=/var/lib/ringmaster
USER 10001:10001
WORKDIR /var/lib/ringmaster
# /metrics when started with --metrics-listen=0.0.0.0:9401 (k8s/, helm/): the agent's series and
# every local rank's figures; the trainers need no metrics port of their own.
EXPOSE 9401
ENTRYPOINT ["/usr/local/bin/ringmaster-agent"]
CMD ["--help"]
