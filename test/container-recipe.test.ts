/**
 * The container recipe without Docker (npm run test:container runs it with Docker): docs/container.md holds the
 * three blocks scripts/container-ci.sh executes, the run block gives the sandbox what it needs and nothing more
 * (the shipped seccomp profile, unmasked /proc, never --privileged), the profile lets bubblewrap build its
 * namespaces and still refuses the kernel's dangerous calls, and every npm step of the Dockerfile reads the
 * build secrets.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const read = (file: string) => readFile(path.join(root, file), "utf8");

/** The fenced block after `<!-- container-ci: NAME -->`, as scripts/container-ci.sh finds it. */
function block(doc: string, name: string): string {
  const at = doc.indexOf(`<!-- container-ci: ${name} -->\n`);
  if (at < 0) return "";
  const open = doc.indexOf("```", at);
  const start = doc.indexOf("\n", open) + 1;
  return doc.slice(start, doc.indexOf("\n```", start) + 1);
}

describe("the container recipe", () => {
  it("docs/container.md holds the build, run and check blocks CI runs", async () => {
    const [doc, script] = await Promise.all([read("docs/container.md"), read("scripts/container-ci.sh")]);
    for (const name of ["build", "run", "check"]) {
      expect(block(doc, name), name).not.toBe("");
      expect(script).toContain(`eval "$(block ${name})"`);
    }
    expect(block(doc, "build")).toMatch(/--secret id=npmrc,src=.*\n.*--secret id=ca,src=/);
    const run = block(doc, "run");
    expect(run).toContain("--security-opt seccomp=docker/seccomp.json");
    expect(run).toContain("--security-opt systempaths=unconfined");
    expect(run).not.toMatch(/--privileged|seccomp=unconfined|--cap-add/);
    expect(block(doc, "check")).toContain("agent-api check");
  });

  it("the seccomp profile allows bubblewrap's namespace calls and refuses the kernel's dangerous ones", async () => {
    const profile = JSON.parse(await read("docker/seccomp.json")) as {
      defaultAction: string;
      syscalls: Array<{ names: string[]; action: string; args?: unknown[] }>;
    };
    const refused = new Set(
      profile.syscalls.filter((s) => s.action === "SCMP_ACT_ERRNO" && !s.args).flatMap((s) => s.names),
    );
    for (const call of ["clone", "clone3", "unshare", "setns", "mount", "umount2", "pivot_root"]) {
      expect(refused.has(call), call).toBe(false);
    }
    for (const call of ["kexec_load", "init_module", "finit_module", "bpf", "ptrace", "keyctl", "add_key"]) {
      expect(refused.has(call), call).toBe(true);
    }
    for (const call of ["reboot", "swapon", "perf_event_open", "userfaultfd", "open_by_handle_at"]) {
      expect(refused.has(call), call).toBe(true);
    }
  });

  it("every npm step of the Dockerfile reads the npmrc and ca build secrets", async () => {
    const dockerfile = await read("Dockerfile");
    const runs = dockerfile.split(/^RUN /m).slice(1);
    const npmSteps = runs.filter((step) => /\bnpm (ci|install)\b/.test(step));
    expect(npmSteps).toHaveLength(2);
    for (const step of npmSteps) {
      expect(step).toContain("--mount=type=secret,id=npmrc");
      expect(step).toContain("--mount=type=secret,id=ca");
      expect(step).toContain("NPM_CONFIG_USERCONFIG=/run/secrets/npmrc");
      expect(step).toContain("NODE_EXTRA_CA_CERTS=/run/secrets/ca");
    }
  });
});
