# syntax=docker/dockerfile:1
# raygate's image, for machines with a container engine:
#
#   docker build -t ghcr.io/raygate/raygate:0.1.0 .
#
# It holds the same files as the image tests/env/images builds without one
# (`tests/env/images raygate`): the build stage runs that script's own rootfs
# step (`--raygate-rootfs`) on the release binary, and the image is that
# directory on scratch, with the config the script writes. The shared
# libraries, CA bundle and os-release come from the build stage's Debian
# packages, so their versions are the build image's (the image records them
# under /var/lib/dpkg/status.d). tests/tests/image.rs checks that this file
# and the script agree. The tag of the build image is the toolchain the
# repository is tested with.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p raygate \
 && tests/env/images --raygate-rootfs target/release/raygate /rootfs

FROM scratch
COPY --from=build /rootfs/ /
LABEL org.opencontainers.image.title="raygate" \
      org.opencontainers.image.description="Runs KubeRay RayJob and RayCluster workloads on the Volcano batch scheduler" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/raygate"]
CMD ["run"]
