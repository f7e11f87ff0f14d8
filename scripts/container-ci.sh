#!/usr/bin/env bash
# CI's container step (.ci/run, after npm test; npm run test:container). Installs Docker and debootstrap from
# Debian, starts dockerd when no engine answers (and stops what it started), makes the base image where no
# registry answers (scripts/container-base.sh), then runs docs/container.md's own command blocks as they are
# written there: build the image, run its demo, check the demo from the image. Passes when that check passes
# every MUST check with the tool checks run in the sandbox (scripts/container-verdict.ts), and when the image run
# without systempaths=unconfined, and with Docker's default profiles, says at start what failed and the fix.
# Prints the image's size and the build's time.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.tmp/container
mkdir -p "$work"
say() { echo "container-ci: $*"; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian's docker client builds with BuildKit itself (DOCKER_BUILDKIT=1); a newer client without its buildx
# plugin cannot, so the page's `docker` is Debian's where the first one on PATH is such a client.
docker_cli=$(command -v docker)
if ! "$docker_cli" buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then docker_cli=/usr/bin/docker; fi
docker() { "$docker_cli" "$@"; }
export DOCKER_CLI=$docker_cli

dockerd_pid=""
cleanup() {
  docker rm -f agent-api agent-api-masked agent-api-default >/dev/null 2>&1 || true
  docker volume rm agent-api-data >/dev/null 2>&1 || true
  if [ -n "$dockerd_pid" ]; then
    say "stopping the dockerd it started"
    kill "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

if ! docker info >/dev/null 2>&1; then
  say "no Docker engine answers: starting dockerd (log: $work/dockerd.log)"
  dockerd >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 240); do
    docker info >/dev/null 2>&1 && break
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
      tail -n 20 "$work/dockerd.log" >&2
      say "dockerd exited"
      exit 1
    fi
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { say "dockerd did not answer in 120 s"; exit 1; }
fi
# Leftovers of an interrupted run would make `docker run --name agent-api` fail.
docker rm -f agent-api >/dev/null 2>&1 || true
docker volume rm agent-api-data >/dev/null 2>&1 || true

base_started=$(date +%s)
scripts/container-base.sh
say "base image ready in $(($(date +%s) - base_started)) s"

# The fenced block after the marker `<!-- container-ci: NAME -->` of docs/container.md.
block() {
  awk -v marker="<!-- container-ci: $1 -->" '
    $0 == marker { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' docs/container.md
}
for name in build run check; do
  [ -n "$(block "$name")" ] || { say "docs/container.md has no block after <!-- container-ci: $name -->"; exit 1; }
done

say "build (docs/container.md):"
block build
build_started=$(date +%s)
eval "$(block build)"
build_seconds=$(($(date +%s) - build_started))
image_bytes=$(docker image inspect -f '{{.Size}}' agent-api)
say "image agent-api: $((image_bytes / 1000000)) MB, built in ${build_seconds} s"

say "run the demo (docs/container.md):"
block run
eval "$(block run)"
if ! docker exec agent-api test -s /data/agent-api.env 2>/dev/null; then
  say "the demo did not write its variables"
  exit 1
fi
# The log is read whole before grep: grep -q stops at its first match, and docker logs then dies of SIGPIPE,
# which pipefail takes for a failed pipeline (exit 141, the step failed on a server that said the line).
demo_logs=$(docker logs agent-api 2>&1)
if ! grep -q '^Tool isolation: bwrap$' <<<"$demo_logs"; then
  echo "$demo_logs" >&2
  say "the server in the container does not run its tools in bubblewrap"
  exit 1
fi

say "check from the image (docs/container.md):"
block check
status=0
eval "$(block check)" || status=$?
mv agent-api-report.json "$work/agent-api-report.json"
say "check exited $status; JSON report: $work/agent-api-report.json"
node scripts/container-verdict.ts "$work/agent-api-report.json"
[ "$status" -eq 0 ]
printf 'image_bytes=%s\nbuild_seconds=%s\n' "$image_bytes" "$build_seconds" >"$work/measurements.txt"

# Without the options the sandbox needs, the server must say at start what failed and which option fixes it.
expect_refusal() {
  local name=$1 expected=$2
  shift 2
  docker run -d --name "$name" "$@" agent-api serve --host 127.0.0.1 --port 8080 --data /tmp/data >/dev/null
  for _ in $(seq 120); do
    grep -q '^Tool user: ' <<<"$(docker logs "$name" 2>&1)" && break
    [ "$(docker inspect -f '{{.State.Running}}' "$name")" = true ] || break
    sleep 0.5
  done
  local logs
  logs=$(docker logs "$name" 2>&1)
  docker rm -f "$name" >/dev/null
  if ! grep -q "^Warning: tools refused: $expected" <<<"$logs"; then
    echo "$logs" >&2
    say "run with $*: the server did not say \"$expected\""
    exit 1
  fi
  local options="$*"
  say "run with ${options:-no security options}: $(grep '^Warning: tools refused: ' <<<"$logs")"
}
expect_refusal agent-api-masked "bubblewrap could not mount /proc" \
  --security-opt seccomp=docker/seccomp.json --security-opt apparmor=unconfined
expect_refusal agent-api-default "bubblewrap could not create the sandbox's namespaces"
