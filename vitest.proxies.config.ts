import { defineConfig } from "vitest/config";
import { VITEST_CONDITIONS } from "./scripts/source-condition.ts";

// `npm run test:proxies`: the README's reverse-proxy guide run in real nginx, HAProxy and Caddy (test/proxies/). Its own
// step in CI after `npm test`, because it takes about a minute and needs nginx, haproxy and caddy installed; also the
// whole suite over HTTP/2 through nginx with TLS (suite-through-nginx.test.ts), and behind the suite's own loopback
// fronts: a prefix, HTML 404/413/502, TLS from a private CA, HTTP/2 (deployment.test.ts, moved out of npm test for
// its whole-suite run over HTTP/2).
export default defineConfig({
  // The workspace packages resolve to their TypeScript sources (scripts/source-condition.ts says why).
  ssr: { resolve: { conditions: VITEST_CONDITIONS } },
  test: {
    include: ["test/proxies/**/*.test.ts"],
    testTimeout: 240_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
