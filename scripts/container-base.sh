#!/usr/bin/env bash
# Makes `node:24-slim` in the local Docker engine when no container registry answers: a Debian bookworm root
# from the apt mirror this machine uses (debootstrap --variant=minbase), Node 24 from the repository's pinned
# node@24 dev dependency and npm from the host, imported with `docker import`. The root's tarball is cached
# under .tmp/container/ so a rerun imports it in seconds. Where a registry answers, the real image is pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=.tmp/container
mkdir -p "$cache"
docker=${DOCKER_CLI:-docker}
image=node:24-slim

if "$docker" image inspect "$image" >/dev/null 2>&1; then
  echo "container-base: $image is already in the engine"
  exit 0
fi
if timeout 60 "$docker" pull -q "$image" >/dev/null 2>&1; then
  echo "container-base: pulled $image from the registry"
  exit 0
fi
echo "container-base: no registry answers for $image; making it locally"

tarball=$cache/node-24-bookworm-root.tar.gz
if [ ! -s "$tarball" ]; then
  node_bin=node_modules/node/bin/node
  if [ ! -x "$node_bin" ] || ! "$node_bin" -e 'process.exit(process.versions.node.startsWith("24.") ? 0 : 1)'; then
    echo "container-base: $node_bin is not Node 24: run npm ci first" >&2
    exit 1
  fi
  npm_dir=$(npm root -g)/npm
  if [ ! -f "$npm_dir/bin/npm-cli.js" ]; then
    echo "container-base: no npm under $(npm root -g)" >&2
    exit 1
  fi
  # The mirror apt uses here (deb822 URIs: or a one-line `deb` entry), so debootstrap works behind the same
  # network rules as apt-get.
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\/\?\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  if [ -z "$mirror" ]; then
    mirror=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
  root=$(mktemp -d /tmp/agent-api-base.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  echo "container-base: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  install -m 0755 "$node_bin" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -czf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
fi
"$docker" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' \
  "$tarball" "$image" >/dev/null
echo "container-base: imported $image from $tarball"
