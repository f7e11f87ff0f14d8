# The reference server and the conformance suite, installed from the packages this repository builds (exactly
# what test/packages installs), on Node 24 with bubblewrap for the tools' sandbox. How to build and run it, and
# what the tools' sandbox needs from Docker: docs/container.md (CI runs that page's commands:
# scripts/container-ci.sh).
#
# npm inside the build reads two optional build secrets, for networks whose registry or TLS-inspecting proxy
# needs them; they never reach a layer of the image:
#   npmrc: an npm configuration file (registry, auth), e.g. --secret id=npmrc,src="$(npm config get userconfig)"
#   ca:    a PEM bundle of extra CA certificates,   e.g. --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt

FROM node:24-slim AS build
WORKDIR /src
COPY . .
# npm's download cache is a BuildKit cache mount: a rebuild after a change of the sources downloads nothing again.
# prepack compiles each workspace (and builds the spec's docs page with Redocly, a devDependency), so the
# tarballs hold JavaScript, .d.ts and the spec, and the image below needs no devDependency.
RUN --mount=type=secret,id=npmrc --mount=type=secret,id=ca --mount=type=cache,id=agent-api-npm,target=/root/.npm \
  if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi \
  && if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
  && npm ci --no-audit --no-fund \
  && mkdir /packages && npm pack --workspaces --pack-destination /packages

FROM node:24-slim
# bubblewrap: the tools' sandbox; git: repository-backed agents; ca-certificates: the Anthropic engine over HTTPS.
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap git ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/agent-api
COPY --from=build /packages/ /tmp/packages/
RUN --mount=type=secret,id=npmrc --mount=type=secret,id=ca --mount=type=cache,id=agent-api-npm,target=/root/.npm \
  if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi \
  && if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
  && echo '{"name":"agent-api-image","private":true,"type":"module"}' > package.json \
  && npm install --omit=dev --no-audit --no-fund /tmp/packages/*.tgz \
  && rm -rf /tmp/packages
ENV PATH=/opt/agent-api/node_modules/.bin:$PATH
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["agent-api"]
# The demo writes the AGENT_API_* variables for `agent-api check` into the volume (docs/container.md uses them).
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--data", "/data", "--write-env-file", "/data/agent-api.env"]
