/** `agent-api ui [flags]`: the same as `agent-api check --ui [flags]` (the page takes check's flags). */
import { main as check } from "./check.ts";

export function main(args: string[]): Promise<number> {
  return check(["--ui", ...args]);
}
