import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", ".tmp/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default", "./scripts/closing-line-reporter.ts"],
  },
});
