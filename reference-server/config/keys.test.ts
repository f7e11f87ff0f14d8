import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createKeyIndex, hashKey } from "./keys.ts";
import type { ApiKeyConfig, FlowConfig } from "./types.ts";

const admin: ApiKeyConfig = {
  hash: hashKey("admin-key-123"),
  label: "admin",
  workspaceId: "w",
  memberId: "ann",
  role: "Admin",
  revoked: false,
};
const revoked: ApiKeyConfig = { ...admin, hash: hashKey("old-key-123"), label: "old", revoked: true };
const flow: FlowConfig = {
  id: "f1",
  workspaceId: "w",
  inputs: [],
  steps: [{ name: "s", agent: "a", prompt: "p" }],
  keyHashes: [hashKey("flow-key-1"), hashKey("flow-key-2").toUpperCase()],
  runAsMemberId: "ann",
};

describe("hashKey", () => {
  it("is the hex SHA-256 of the UTF-8 key", () => {
    expect(hashKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(hashKey("ключ")).toBe(createHash("sha256").update(Buffer.from("ключ", "utf8")).digest("hex"));
  });
});

describe("createKeyIndex", () => {
  const index = createKeyIndex({ keys: [admin, revoked], flows: [flow] });

  it("finds a key by its plaintext and keeps the revoked flag", () => {
    expect(index.lookup("admin-key-123")).toBe(admin);
    expect(index.lookup("old-key-123")).toEqual(expect.objectContaining({ revoked: true, label: "old" }));
  });

  it("returns undefined for unknown, empty, near-miss and hash-as-key input", () => {
    for (const key of [
      "",
      "admin-key-12",
      "admin-key-1234",
      "ADMIN-KEY-123",
      admin.hash,
      "\u0000".repeat(64),
    ]) {
      expect(index.lookup(key)).toBeUndefined();
    }
  });

  it("checks flow keys per flow, whatever the case of the stored hash", () => {
    expect(index.lookupFlowKey("f1", "flow-key-1")).toBe(true);
    expect(index.lookupFlowKey("f1", "flow-key-2")).toBe(true);
    expect(index.lookupFlowKey("f1", "flow-key-3")).toBe(false);
    expect(index.lookupFlowKey("f1", "admin-key-123")).toBe(false);
    expect(index.lookupFlowKey("f2", "flow-key-1")).toBe(false);
    // API keys and flow keys are separate: a flow key is not an API key.
    expect(index.lookup("flow-key-1")).toBeUndefined();
  });

  it("tells a key of any deployed flow (the flow route's 404 for another flow) from one of none (401)", () => {
    expect(index.lookupFlowKey(undefined, "flow-key-2")).toBe(true);
    expect(index.lookupFlowKey(undefined, "admin-key-123")).toBe(false);
    expect(index.lookupFlowKey(undefined, "")).toBe(false);
  });
});
