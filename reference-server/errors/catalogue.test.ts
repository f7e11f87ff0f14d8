/**
 * The error catalogue as operators read it (reference-server/README.md, "Error codes"): every code in the
 * table of its side of the stream's opening, with the catalogue's status. A code added without its row, or a
 * status changed without the table, fails here.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type ErrorCode, errorCatalogue } from "./catalogue.ts";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const [before, after] = readme.split("**After a turn's stream opened**");

/** Code → status of the table rows in a part of the README. */
function rows(part: string): Map<string, number> {
  const table = new Map<string, number>();
  for (const match of part.matchAll(/^\| `(AGENT_API_[A-Z_]+)` *\| (\d{3})/gm))
    table.set(match[1], Number(match[2]));
  return table;
}

describe("the error catalogue's documentation", () => {
  it("lists every code with its status, before or after the stream opens as the catalogue says", () => {
    const beforeRows = rows(before);
    const afterRows = rows(after ?? "");
    for (const [code, entry] of Object.entries(errorCatalogue) as Array<
      [ErrorCode, (typeof errorCatalogue)[ErrorCode]]
    >) {
      const table = "afterStreamOpens" in entry ? afterRows : beforeRows;
      expect([code, table.get(code)]).toEqual([code, entry.status]);
    }
    const known = new Set<string>(Object.keys(errorCatalogue));
    expect([...beforeRows.keys(), ...afterRows.keys()].filter((code) => !known.has(code))).toEqual([]);
  });
});
