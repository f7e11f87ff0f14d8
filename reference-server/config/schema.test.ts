/**
 * The config file's TypeScript interface (ConfigFile) and its JSON Schema (configFileSchema) describe one
 * shape: the type json-schema-to-ts derives from the schema and the interface must each be assignable to
 * the other, which tsc checks (npm run typecheck). The interface stays written out for its comments and for
 * the package's declarations, which then need no type library.
 */
import type { FromSchema } from "json-schema-to-ts";
import { describe, expect, it } from "vitest";
import type { ConfigFile, configFileSchema } from "./schema.ts";

type FromTheSchema = FromSchema<typeof configFileSchema>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// A compile-time fact: `true` is assignable only when the two shapes are the same.
const sameShape: Same<ConfigFile, FromTheSchema> = true;

describe("the config file's shape", () => {
  it("is one shape in the interface and the JSON Schema (checked by tsc)", () => {
    expect(sameShape).toBe(true);
  });
});
