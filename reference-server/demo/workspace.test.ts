import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKeyIndex } from "../config/keys.ts";
import { loadConfigFile } from "../config/load.ts";
import { createDemo, DEMO_ADMIN_KEY, demoSummary, formatEnvFile, isGitUrl } from "./workspace.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "demo-test-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const opts = { baseUrl: "http://127.0.0.1:3001", routingPrefix: "acme" };

function git(gitDir: string, ...args: string[]): string {
  return execFileSync("git", [`--git-dir=${gitDir}`, ...args], { encoding: "utf8" }).trim();
}

describe("createDemo", () => {
  it("builds the documented demo, twice in the same directory with the same result", async () => {
    const first = await createDemo(dir, opts);
    const repo = join(dir, "demo", "acme-widgets.git");
    const head = git(repo, "rev-parse", "refs/heads/main");
    const second = await createDemo(dir, opts);
    expect(second).toEqual(first);
    expect(git(repo, "rev-parse", "refs/heads/main")).toBe(head);
    expect(git(repo, "rev-list", "--count", "main")).toBe("1");
    expect(git(repo, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
    expect(git(repo, "ls-tree", "--name-only", "main").split("\n")).toEqual(["README.md", "widgets.txt"]);

    const { config, keys, envVars } = first;
    expect(config.agents.map((a) => [a.name, a.workspaceId, a.kind])).toEqual([
      ["demo-agent", "demo", "storage"],
      ["notes-agent", "demo", "storage"],
      ["acme-widgets", "demo", "repo"],
      ["other-agent", "other", "storage"],
    ]);
    const demoAgent = config.agents[0];
    expect(demoAgent.defaultModel).toBe("demo-large");
    expect(demoAgent.models.map((m) => m.id).sort()).toEqual(["demo-large", "demo-small"]);
    expect(demoAgent.automations).toEqual([
      {
        name: "nightly-summary",
        prompt: "Summarise the day. Always include the token AUTOMATION-PROMPT-USED",
        model: "demo-small",
        active: true,
      },
    ]);
    expect(demoAgent.secrets).toEqual({ DEMO_SECRET: "demo-secret-value" });
    expect(readFileSync(join(config.agents[1].filesDir as string, "README.md"), "utf8")).toContain("Notes");
    expect(config.agents[2].repoUrl).toBe(repo);

    const index = createKeyIndex(config);
    expect(index.lookup(keys.admin)).toMatchObject({ memberId: "alice", role: "Admin", workspaceId: "demo" });
    expect(index.lookup(keys.member)).toMatchObject({ memberId: "bob", role: "Operator", revoked: false });
    expect(index.lookup(keys.viewer)).toMatchObject({ memberId: "carol", role: "Viewer" });
    expect(index.lookup(keys.revoked)).toMatchObject({ memberId: "dave", revoked: true });
    expect(index.lookup(keys.otherAdmin)).toMatchObject({
      memberId: "olga",
      role: "Admin",
      workspaceId: "other",
    });
    expect(index.lookupFlowKey("demo-flow", keys.flow)).toBe(true);
    expect(config.flows[0]).toMatchObject({ inputs: ["topic"], runAsMemberId: "alice", workspaceId: "demo" });
    expect(config.flows[0].steps.map((s) => s.name)).toEqual(["draft", "review"]);

    expect(envVars).toMatchObject({
      AGENT_API_BASE_URL: opts.baseUrl,
      AGENT_API_AGENT: "demo-agent",
      AGENT_API_KEY: "demo-admin-key",
      AGENT_API_MEMBER_KEY: "demo-member-key",
      AGENT_API_VIEWER_KEY: "demo-viewer-key",
      AGENT_API_REVOKED_KEY: "demo-revoked-key",
      AGENT_API_FOREIGN_AGENT: "other-agent",
      AGENT_API_FOREIGN_KEY: "other-admin-key",
      AGENT_API_AUTOMATION: "nightly-summary",
      AGENT_API_STORAGE_AGENT: "notes-agent",
      AGENT_API_REPO_AGENT: "acme-widgets",
      AGENT_API_REPO_URL: repo,
      AGENT_API_FLOW_URL: opts.baseUrl,
      AGENT_API_FLOW_ID: "demo-flow",
      AGENT_API_FLOW_KEY: "demo-flow-key",
      AGENT_API_FLOW_INPUT: "topic=testing",
      AGENT_API_ROUTING_PREFIX: "acme",
      AGENT_API_CHANNEL_ID: "C0DEMOOPS",
      AGENT_API_NOTEBOOK_PATH: "notebooks/weekly-report.ipynb",
    });
    // The repository clones like any remote.
    const clone = join(dir, "clone");
    execFileSync("git", ["clone", "--quiet", repo, clone]);
    expect(existsSync(join(clone, "README.md"))).toBe(true);
  });

  it("writes a demo config file that loads back to the same configuration", async () => {
    const { config } = await createDemo(dir, opts);
    expect(await loadConfigFile(join(dir, "demo", "demo-config.yaml"))).toEqual(config);
  });
});

describe("createDemo with a shared remote (--demo-remote)", () => {
  it("instances starting at once on one path create one repository, and all name it", async () => {
    const shared = join(dir, "shared", "acme-widgets.git");
    const demos = await Promise.all(
      [1, 2, 3, 4].map((i) => createDemo(join(dir, `instance-${i}`), { ...opts, remote: shared })),
    );
    for (const demo of demos) {
      expect(demo.envVars.AGENT_API_REPO_URL).toBe(shared);
      expect(demo.config.agents[2].repoUrl).toBe(shared);
    }
    expect(git(shared, "rev-list", "--count", "main")).toBe("1");
    expect(git(shared, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
    // Each instance built its copy aside; the losers' copies are gone.
    expect(readdirSync(join(dir, "shared"))).toEqual(["acme-widgets.git"]);
    // No instance made a repository of its own.
    expect(existsSync(join(dir, "instance-1", "demo", "acme-widgets.git"))).toBe(false);
  });

  it("leaves a remote that has main alone, and gives an empty bare repository its first commit", async () => {
    const shared = join(dir, "shared", "acme-widgets.git");
    const before = git(shared, "rev-parse", "main");
    await createDemo(join(dir, "instance-5"), { ...opts, remote: shared });
    expect(git(shared, "rev-parse", "main")).toBe(before);

    const empty = join(dir, "empty.git");
    execFileSync("git", ["init", "--quiet", "--bare", empty]);
    await Promise.all([1, 2].map((i) => createDemo(join(dir, `empty-${i}`), { ...opts, remote: empty })));
    // The same commit as anywhere else: fixed identity and dates.
    expect(git(empty, "rev-parse", "main")).toBe(before);
  });

  it("names a relative path absolutely, and refuses a path that is not a repository", async () => {
    const remote = relative(process.cwd(), join(dir, "rel", "acme.git"));
    const demo = await createDemo(join(dir, "relative"), { ...opts, remote });
    expect(demo.envVars.AGENT_API_REPO_URL).toBe(join(dir, "rel", "acme.git"));
    const notRepo = join(dir, "not-a-repo");
    mkdirSync(notRepo);
    writeFileSync(join(notRepo, "file.txt"), "x");
    await expect(createDemo(join(dir, "bad"), { ...opts, remote: notRepo })).rejects.toThrow(
      /not a git repository the demo can use/,
    );
  });

  it("gives a git URL's empty repository the demo's first commit, once", async () => {
    const server = join(dir, "git-server", "acme.git");
    execFileSync("git", ["init", "--quiet", "--bare", "--initial-branch=main", server]);
    const url = `file://${server}`;
    const demos = await Promise.all(
      [1, 2, 3].map((i) => createDemo(join(dir, `url-${i}`), { ...opts, remote: url })),
    );
    for (const demo of demos) expect(demo.envVars.AGENT_API_REPO_URL).toBe(url);
    expect(git(server, "rev-list", "--count", "main")).toBe("1");
    const clone = join(dir, "url-clone");
    execFileSync("git", ["clone", "--quiet", url, clone]);
    expect(readFileSync(join(clone, "widgets.txt"), "utf8")).toBe("sprocket\ngear\nflange\n");
    await expect(
      createDemo(join(dir, "url-bad"), { ...opts, remote: `file://${join(dir, "no-such-server.git")}` }),
    ).rejects.toThrow(/not reachable or refused/);
  });

  it("tells git URLs from paths as git does", () => {
    for (const url of [
      "https://git.example/acme.git",
      "ssh://git@host/acme.git",
      "git@host:acme.git",
      "file:///srv/acme.git",
    ])
      expect(isGitUrl(url), url).toBe(true);
    for (const path of ["/srv/git/acme.git", "./acme.git", "acme.git", "dir/with:colon.git"])
      expect(isGitUrl(path), path).toBe(false);
  });
});

describe("formatEnvFile", () => {
  it("round-trips through `set -a; . file; env` in bash, awkward values included", async () => {
    const { envVars } = await createDemo(dir, opts);
    const vars = {
      ...envVars,
      AGENT_API_X_QUOTE: 'it\'s "quoted" $HOME `uname` \\ back',
      AGENT_API_X_SPACE: "a  b\tc",
      AGENT_API_X_EMPTY: "",
      AGENT_API_X_UNICODE: "naïve ☕",
      AGENT_API_X_NEWLINE: "line1\nline2",
    };
    const file = join(dir, "agent-api.env");
    const text = formatEnvFile(vars);
    expect(text.split("\n")).toContain("AGENT_API_AGENT=demo-agent");
    writeFileSync(file, text);
    const out = execFileSync("bash", ["-c", 'set -a; . "$1"; env -0', "bash", file], {
      encoding: "utf8",
      env: { PATH: process.env.PATH },
    });
    const seen = Object.fromEntries(
      out
        .split("\0")
        .filter((line) => line.includes("="))
        .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
    );
    for (const [name, value] of Object.entries(vars)) expect(seen[name], name).toBe(value);
  });

  it("refuses names that are not environment variable names", () => {
    expect(() => formatEnvFile({ "BAD NAME": "x" })).toThrow(/not an environment variable name/);
  });
});

describe("demoSummary", () => {
  it("lists the keys and prints the curl example from the README", () => {
    const text = demoSummary(
      {
        admin: DEMO_ADMIN_KEY,
        member: "demo-member-key",
        viewer: "demo-viewer-key",
        revoked: "demo-revoked-key",
        otherAdmin: "other-admin-key",
        flow: "demo-flow-key",
      },
      "http://127.0.0.1:3001/",
    );
    for (const key of [
      "demo-admin-key",
      "demo-member-key",
      "demo-viewer-key",
      "demo-revoked-key",
      "other-admin-key",
    ]) {
      expect(text).toContain(key);
    }
    expect(text).toContain(
      `curl -N http://127.0.0.1:3001/api/agents/demo-agent/v1/messages -H 'X-Api-Key: demo-admin-key' -H 'content-type: application/json' -d '{"messages":[{"role":"user","content":"Remember this code word: kiwi. Reply with just OK."}]}'`,
    );
  });
});
