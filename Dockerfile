# djinn in a small image: built in one stage, run in another, as a user
# without privileges, with its data in a volume.
#
#   docker build -t djinn --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -p 4161:4161 -p 4162:4162 -v djinn-data:/var/lib/djinn djinn
#
# The server listens on every interface of the container; references name
# 127.0.0.1:4161 (what a client on the host dials through -p 4161:4161):
# set DJINN_ADVERTISE to the address clients dial. A cluster also sets
# DJINN_RAFT and DJINN_RAFT_ADVERTISE (and --join); see the README.
# cmd/djinn/release_test.go runs this file's go build line.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION} -X main.buildCommit=${COMMIT}" -o /out/djinn ./cmd/djinn
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/djinn /usr/local/bin/djinn
COPY --from=build --chown=nonroot:nonroot /out/data /var/lib/djinn
ENV DJINN_DATA_DIR=/var/lib/djinn \
    DJINN_LISTEN=0.0.0.0:4161 \
    DJINN_ADVERTISE=127.0.0.1:4161 \
    DJINN_ADMIN=0.0.0.0:4162 \
    DJINN_RAFT=127.0.0.1:4163 \
    DJINN_LOOKUP_DISCOVERY=0.0.0.0:4160
VOLUME /var/lib/djinn
USER nonroot:nonroot
EXPOSE 4160 4161 4162
ENTRYPOINT ["/usr/local/bin/djinn"]
CMD ["serve"]
