import { defineConfig } from "vitest/config";

// `npm run test:proxies`: the README's reverse-proxy guide run in real nginx, HAProxy and Caddy (test/proxies/). Its own
// step in CI after `npm test`, because it takes about a minute and needs nginx and haproxy installed.
export default defineConfig({
  test: {
    include: ["test/proxies/**/*.test.ts"],
    testTimeout: 240_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
