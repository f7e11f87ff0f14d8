# The reference server and the conformance suite, installed from the packages this repository builds (exactly
# what test/packages installs), on Node 24 with bubblewrap for the tools' sandbox.
#
#   docker build -t agent-api .
#   docker run --rm -p 8080:8080 -v agent-api-data:/data \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined agent-api
#   docker run --rm --network host agent-api check --base-url URL --agent NAME --key KEY --junit /dev/stdout
#
# bubblewrap needs user namespaces, which Docker's default seccomp and AppArmor profiles refuse; without the
# two --security-opt flags the server starts but refuses every tool (it says so in its log). The default
# command serves the demo workspace; `serve --config FILE` serves your own.
#
# Docker mounts /sys/fs/cgroup read-only in a container that is not privileged, so commands get no cgroup of
# their own (the start-up line says `tool limits (cgroups): none` and why). Processes (RLIMIT_NPROC) and memory
# (RLIMIT_AS) stay bounded per command; CPU per command does not: bound the container with --cpus and --memory.
#
# Not built here (no Docker engine on this project's machines): the build stage's commands run in a clean
# clone, and test/packages installs the same tarballs with --omit=dev and starts this CMD.

FROM node:24-slim AS build
WORKDIR /src
COPY . .
# prepack compiles each workspace (and builds the spec's docs page with Redocly, a devDependency), so the
# tarballs hold JavaScript, .d.ts and the spec, and the image below needs no devDependency.
RUN npm ci --no-audit --no-fund \
  && mkdir /packages && npm pack --workspaces --pack-destination /packages

FROM node:24-slim
# bubblewrap: the tools' sandbox; git: repository-backed agents; ca-certificates: the Anthropic engine over HTTPS.
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap git ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/agent-api
COPY --from=build /packages/ /tmp/packages/
RUN echo '{"name":"agent-api-image","private":true,"type":"module"}' > package.json \
  && npm install --omit=dev --no-audit --no-fund /tmp/packages/*.tgz \
  && rm -rf /tmp/packages
ENV PATH=/opt/agent-api/node_modules/.bin:$PATH
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["agent-api"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--data", "/data"]
