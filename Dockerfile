# levee's container image (docs/operations.md).
#
#   docker build --build-arg VERSION=$(git describe --tags --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short=12 HEAD) -t levee .
#   docker run -p 8080:8080 -p 9901:9901 -v $PWD/levee.yaml:/etc/levee/levee.yaml:ro levee
#
# The build is the Makefile's `make build` itself (its BUILD: CGO_ENABLED=0
# for a static binary, -trimpath, an empty build id, the version stamp), so
# the image's binary and `make build`'s are built one way
# (TestDockerfileBuildsAsMakefile). Without .git in the context, the
# version comes from the VERSION file unless --build-arg VERSION is given. The final image is distroless: no shell, no package manager,
# user nonroot (65532).
#
# Inside a container both listeners must bind 0.0.0.0 to be reachable, and
# an admin listener off loopback needs admin.token_file (or admin.tokens).
# There is no HEALTHCHECK: the image has no shell or curl, and levee has no
# health subcommand. /healthz (alive) and /readyz (serving) on the admin
# port answer without a token: point the orchestrator's HTTP probes at
# them (Kubernetes livenessProbe and readinessProbe, httpGet, port 9901).

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The golang image has make (and no .git in the context: the VERSION file).
ARG VERSION
ARG COMMIT=unknown
ARG DATE=unknown
RUN make build GO=go COMMIT=${COMMIT} DATE=${DATE} ${VERSION:+VERSION=${VERSION}} \
 && mkdir -p /out/state && cp bin/levee /out/levee

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/levee /usr/local/bin/levee
# state_dir: the app store and discovery snapshots. The default state_dir
# (./levee-state) lands in it, the working directory; mount a volume to
# keep it across containers.
COPY --from=build --chown=65532:65532 /out/state /var/lib/levee
WORKDIR /var/lib/levee
USER 65532:65532
VOLUME /var/lib/levee
EXPOSE 8080 9901
ENTRYPOINT ["/usr/local/bin/levee"]
CMD ["run", "-config", "/etc/levee/levee.yaml"]
