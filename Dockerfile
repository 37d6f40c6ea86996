# mlasim CI image: Debian 12 (bookworm) with every package scripts/install-deps.sh installs.
# CI mounts the checkout and runs make targets in it (docs/ci.md):
#   docker build -t mlasim-ci .
#   docker run --rm -v "$PWD:/src" mlasim-ci                  # make verify
#   docker run --rm -v "$PWD:/src" mlasim-ci make asan tsan  # the sanitizer job
FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN bash /tmp/install-deps.sh && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh
WORKDIR /src
CMD ["make", "verify"]
