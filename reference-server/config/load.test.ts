import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as stringifyYaml } from "yaml";
import { createKeyIndex, hashKey } from "./keys.ts";
import { ConfigError, loadConfigFile, parseConfig } from "./load.ts";
import type { ConfigFile } from "./schema.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "config-test-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function example(): ConfigFile {
  return {
    workspaces: [
      { id: "acme", name: "Acme", members: [{ id: "ann", name: "Ann" }, { id: "ben" }] },
      { id: "beta", members: [{ id: "bea" }] },
    ],
    keys: [
      { key: "ann-secret-key", label: "ann-admin", workspace: "acme", member: "ann", role: "Admin" },
      { key_sha256: "A".repeat(64), workspace: "acme", member: "ben", role: "Viewer", revoked: true },
    ],
    agents: [
      {
        name: "helper",
        workspace: "acme",
        kind: "storage",
        default_model: "big",
        models: [{ id: "small", display_name: "Small" }],
        instructions: "Be helpful.",
        automations: [{ name: "daily", prompt: "Summarise", model: "small" }],
        secrets: { TOKEN: "t" },
        files_dir: "files/helper",
      },
      {
        name: "acme-widgets",
        workspace: "acme",
        kind: "repo",
        default_model: "big",
        repo_url: "repos/w.git",
      },
      {
        name: "remote",
        workspace: "beta",
        kind: "repo",
        default_model: "m",
        repo_url: "https://example.com/r.git",
      },
    ],
    flows: [
      {
        id: "f1",
        workspace: "acme",
        inputs: ["topic"],
        steps: [
          { name: "one", agent: "helper", prompt: "About {{topic}}" },
          { name: "two", agent: "helper", prompt: "Check {{ previous }}" },
        ],
        keys: [{ key: "flow-secret-key" }],
        run_as: "ann",
      },
    ],
  };
}

function writeConfig(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** The issues of the ConfigError that `make` throws; fails the test if it does not throw one. */
function issuesOf(make: () => unknown): string[] {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).not.toMatch(/\n\s+at /); // no stack trace in the message
    return (error as ConfigError).issues;
  }
  throw new Error("expected a ConfigError");
}

function withChange(change: (file: ConfigFile) => void): ConfigFile {
  const file = example();
  change(file);
  return file;
}

describe("loadConfigFile", () => {
  it("loads YAML and JSON into the same ServerConfig, hashing plaintext keys", async () => {
    const fromYaml = await loadConfigFile(writeConfig("server.yaml", stringifyYaml(example())));
    const fromYml = await loadConfigFile(writeConfig("server.yml", stringifyYaml(example())));
    const fromJson = await loadConfigFile(writeConfig("server.json", JSON.stringify(example())));
    expect(fromYml).toEqual(fromYaml);
    expect(fromJson).toEqual(fromYaml);

    expect(fromYaml.workspaces).toEqual([
      {
        id: "acme",
        name: "Acme",
        members: [
          { id: "ann", name: "Ann" },
          { id: "ben", name: "ben" },
        ],
      },
      { id: "beta", name: "beta", members: [{ id: "bea", name: "bea" }] },
    ]);
    expect(fromYaml.keys).toEqual([
      {
        hash: hashKey("ann-secret-key"),
        label: "ann-admin",
        workspaceId: "acme",
        memberId: "ann",
        role: "Admin",
        revoked: false,
      },
      {
        hash: "a".repeat(64),
        label: "acme/ben/Viewer",
        workspaceId: "acme",
        memberId: "ben",
        role: "Viewer",
        revoked: true,
      },
    ]);
    expect(JSON.stringify(fromYaml)).not.toContain("ann-secret-key");
    expect(JSON.stringify(fromYaml)).not.toContain("flow-secret-key");

    const [helper, widgets, remote] = fromYaml.agents;
    expect(helper).toEqual({
      name: "helper",
      workspaceId: "acme",
      kind: "storage",
      defaultModel: "big",
      // The default model is added when `models` does not list it.
      models: [
        { id: "big", display_name: "big" },
        { id: "small", display_name: "Small" },
      ],
      instructions: "Be helpful.",
      automations: [{ name: "daily", prompt: "Summarise", model: "small", active: true }],
      secrets: { TOKEN: "t" },
      filesDir: join(dir, "files/helper"),
    });
    expect(widgets.repoUrl).toBe(join(dir, "repos/w.git"));
    expect(widgets).toMatchObject({ instructions: "", automations: [], secrets: {} });
    expect(remote.repoUrl).toBe("https://example.com/r.git");
    expect(fromYaml.flows).toEqual([
      {
        id: "f1",
        workspaceId: "acme",
        inputs: ["topic"],
        steps: [
          { name: "one", agent: "helper", prompt: "About {{topic}}" },
          { name: "two", agent: "helper", prompt: "Check {{ previous }}" },
        ],
        keyHashes: [hashKey("flow-secret-key")],
        runAsMemberId: "ann",
      },
    ]);
  });

  it("reports unreadable files, bad syntax and unknown extensions clearly", async () => {
    await expect(loadConfigFile(join(dir, "missing.yaml"))).rejects.toThrow(/cannot read the file/);
    await expect(loadConfigFile(writeConfig("bad.json", "{ not json"))).rejects.toThrow(/not valid JSON/);
    await expect(loadConfigFile(writeConfig("bad.yaml", "a: [1, 2\nb: }"))).rejects.toThrow(/not valid YAML/);
    await expect(loadConfigFile(writeConfig("dup.yaml", "workspaces: []\nworkspaces: []\n"))).rejects.toThrow(
      /not valid YAML/,
    );
    await expect(loadConfigFile(writeConfig("server.toml", "x = 1"))).rejects.toThrow(
      /unsupported file extension/,
    );
    await expect(loadConfigFile(writeConfig("empty.yaml", ""))).rejects.toThrow(ConfigError);
  });
});

describe("validation errors name the place in the file", () => {
  const cases: Array<[string, (file: ConfigFile) => void, RegExp]> = [
    [
      "unknown top-level property",
      (f) => Object.assign(f, { extra: 1 }),
      /^\(top level\): unknown property "extra"/,
    ],
    ["missing workspaces", (f) => Reflect.deleteProperty(f, "workspaces"), /missing property "workspaces"/],
    [
      "wrong type",
      (f) => Object.assign(f.agents?.[0] ?? {}, { instructions: 5 }),
      /^agents\[0\]\.instructions: must be string/,
    ],
    [
      "bad role",
      (f) => Object.assign(f.keys?.[0] ?? {}, { role: "Owner" }),
      /^keys\[0\]\.role: must be one of "Admin"/,
    ],
    [
      "bad kind",
      (f) => Object.assign(f.agents?.[0] ?? {}, { kind: "cloud" }),
      /^agents\[0\]\.kind: must be one of/,
    ],
    [
      "bad secret name",
      (f) => Object.assign(f.agents?.[0] ?? {}, { secrets: { "a-b": "x" } }),
      /^agents\[0\]\.secrets: property name "a-b"/,
    ],
    [
      "short key",
      (f) => Object.assign(f.keys?.[0] ?? {}, { key: "short" }),
      /^keys\[0\]\.key: must NOT have fewer than 8/,
    ],
    [
      "id with a space",
      (f) => Object.assign(f.workspaces[0], { id: "a b" }),
      /^workspaces\[0\]\.id: must be a name without spaces or "\/"/,
    ],
    [
      "bad key hash",
      (f) => Object.assign(f.keys?.[1] ?? {}, { key_sha256: "zz" }),
      /^keys\[1\]\.key_sha256: must be 64 hex digits/,
    ],
    [
      "duplicate workspace",
      (f) => f.workspaces.push({ id: "acme", members: [] }),
      /^workspaces\[2\]\.id: duplicate workspace "acme"/,
    ],
    [
      "duplicate member",
      (f) => f.workspaces[0].members.push({ id: "ann" }),
      /^workspaces\[0\]\.members\[2\]\.id: duplicate member "ann"/,
    ],
    [
      "key in unknown workspace",
      (f) => Object.assign(f.keys?.[0] ?? {}, { workspace: "nope" }),
      /^keys\[0\]\.workspace: unknown workspace "nope"/,
    ],
    [
      "key for unknown member",
      (f) => Object.assign(f.keys?.[0] ?? {}, { member: "bea" }),
      /^keys\[0\]\.member: unknown member "bea" in workspace "acme"/,
    ],
    [
      "key and key_sha256 both",
      (f) => Object.assign(f.keys?.[0] ?? {}, { key_sha256: "b".repeat(64) }),
      /^keys\[0\]: give exactly one of "key"/,
    ],
    [
      "neither key nor hash",
      (f) => Reflect.deleteProperty(f.keys?.[0] ?? {}, "key"),
      /^keys\[0\]: give exactly one of "key"/,
    ],
    [
      "duplicate key",
      (f) =>
        f.keys?.push({
          key_sha256: hashKey("ann-secret-key"),
          workspace: "acme",
          member: "ben",
          role: "Viewer",
        }),
      /^keys\[2\]: same key as keys\[0\]/,
    ],
    [
      "agent in unknown workspace",
      (f) => Object.assign(f.agents?.[0] ?? {}, { workspace: "gamma" }),
      /^agents\[0\]\.workspace: unknown workspace "gamma"/,
    ],
    [
      "duplicate agent across workspaces",
      (f) => Object.assign(f.agents?.[2] ?? {}, { name: "helper" }),
      /^agents\[2\]\.name: duplicate agent name "helper"/,
    ],
    [
      "repo agent name not lowercase",
      (f) => Object.assign(f.agents?.[1] ?? {}, { name: "Acme_Widgets" }),
      /^agents\[1\]\.name: repo agent "Acme_Widgets" must be lowercase/,
    ],
    [
      "repo agent without repo_url",
      (f) => Reflect.deleteProperty(f.agents?.[1] ?? {}, "repo_url"),
      /^agents\[1\]: repo agent needs "repo_url"/,
    ],
    [
      "storage agent with repo_url",
      (f) => Object.assign(f.agents?.[0] ?? {}, { repo_url: "x.git" }),
      /^agents\[0\]\.repo_url: only repo agents/,
    ],
    [
      "duplicate model",
      (f) => f.agents?.[0].models?.push({ id: "small" }),
      /^agents\[0\]\.models\[1\]\.id: duplicate model "small"/,
    ],
    [
      "automation model unknown",
      (f) => Object.assign(f.agents?.[0].automations?.[0] ?? {}, { model: "huge" }),
      /^agents\[0\]\.automations\[0\]\.model: "huge" is not one of the agent's models/,
    ],
    [
      "duplicate automation",
      (f) => f.agents?.[0].automations?.push({ name: "daily", prompt: "p" }),
      /^agents\[0\]\.automations\[1\]\.name: duplicate automation "daily"/,
    ],
    [
      "flow step unknown agent",
      (f) => Object.assign(f.flows?.[0].steps[0] ?? {}, { agent: "ghost" }),
      /^flows\[0\]\.steps\[0\]\.agent: unknown agent "ghost"/,
    ],
    [
      "flow step agent of another workspace",
      (f) => Object.assign(f.flows?.[0].steps[0] ?? {}, { agent: "remote" }),
      /^flows\[0\]\.steps\[0\]\.agent: agent "remote" is not in workspace "acme"/,
    ],
    [
      "flow run_as unknown",
      (f) => Object.assign(f.flows?.[0] ?? {}, { run_as: "zed" }),
      /^flows\[0\]\.run_as: unknown member "zed"/,
    ],
    [
      "flow template unknown variable",
      (f) => Object.assign(f.flows?.[0].steps[1] ?? {}, { prompt: "{{subject}}" }),
      /^flows\[0\]\.steps\[1\]\.prompt: \{\{subject\}\} is not one of the flow's inputs/,
    ],
    [
      "first step uses previous",
      (f) => Object.assign(f.flows?.[0].steps[0] ?? {}, { prompt: "{{previous}}" }),
      /^flows\[0\]\.steps\[0\]\.prompt: the first step has no \{\{previous\}\}/,
    ],
    [
      "flow without steps",
      (f) => Object.assign(f.flows?.[0] ?? {}, { steps: [] }),
      /^flows\[0\]\.steps: must NOT have fewer than 1 items/,
    ],
    [
      "duplicate flow key",
      (f) => f.flows?.[0].keys.push({ key: "flow-secret-key" }),
      /^flows\[0\]\.keys\[1\]: duplicate flow key/,
    ],
    [
      "duplicate flow",
      (f) => f.flows?.push({ ...(f.flows?.[0] as NonNullable<ConfigFile["flows"]>[0]) }),
      /^flows\[1\]\.id: duplicate flow "f1"/,
    ],
  ];
  it.each(cases)("%s", (_name, change, expected) => {
    const issues = issuesOf(() => parseConfig(withChange(change), dir, "test.yaml"));
    expect(
      issues.some((issue) => expected.test(issue)),
      issues.join("\n"),
    ).toBe(true);
  });

  it("reports every problem at once and names the file", () => {
    const file = withChange((f) => {
      Object.assign(f.keys?.[0] ?? {}, { workspace: "nope" });
      Object.assign(f.agents?.[2] ?? {}, { workspace: "gamma" });
    });
    try {
      parseConfig(file, dir, "server.yaml");
      expect.unreachable();
    } catch (error) {
      expect((error as ConfigError).issues).toHaveLength(2);
      expect((error as Error).message).toMatch(/^invalid config server\.yaml:\n {2}- keys\[0\]/);
    }
  });

  it("rejects things that are not a config object", () => {
    for (const raw of [null, 42, "text", [], {}])
      expect(issuesOf(() => parseConfig(raw, dir)).length).toBeGreaterThan(0);
  });
});

describe("README", () => {
  it("its example config file is valid", async () => {
    const readme = readFileSync(new URL("./README.md", import.meta.url), "utf8");
    const example = /```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toBeDefined();
    const config = await loadConfigFile(writeConfig("readme.yaml", example as string));
    expect(config.agents.map((a) => a.name)).toEqual(["helper", "acme-widgets"]);
    expect(createKeyIndex(config).lookup("acme-ben-viewer-key")).toMatchObject({
      memberId: "ben",
      revoked: true,
    });
  });
});

describe("model settings of the agent loop", () => {
  it("maps upstream names, prices (cache prices derived when absent), thinking budgets and max_tokens", () => {
    const file = example();
    const helper = file.agents?.[0];
    if (!helper) throw new Error("example has no agent");
    helper.models = [
      { id: "small", upstream: "claude-small-1", price: { input: 1, output: 5 }, max_tokens: 2000 },
      {
        id: "big",
        thinking_budget_tokens: 2048,
        price: { input: 3, output: 15, cache_read: 0.2, cache_write: 4 },
      },
    ];
    helper.thinking_budget_tokens = 1024;
    const agent = parseConfig(file, dir).agents.find((a) => a.name === "helper");
    expect(agent?.thinkingBudgetTokens).toBe(1024);
    expect(agent?.models).toEqual([
      {
        id: "small",
        display_name: "small",
        upstream: "claude-small-1",
        price: { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
        maxTokens: 2000,
      },
      {
        id: "big",
        display_name: "big",
        price: { input: 3, output: 15, cache_read: 0.2, cache_write: 4 },
        thinkingBudgetTokens: 2048,
      },
    ]);
  });

  it("rejects a negative price and a thinking budget below the API's minimum", () => {
    const file = example();
    const helper = file.agents?.[0];
    if (!helper) throw new Error("example has no agent");
    helper.models = [{ id: "small", price: { input: -1, output: 5 } }];
    expect(() => parseConfig(file, dir)).toThrow(ConfigError);
    helper.models = [{ id: "small", thinking_budget_tokens: 10 }];
    expect(() => parseConfig(file, dir)).toThrow(ConfigError);
  });
});
