/** The spec: operations, their parameters, request schemas, statuses and security. */

import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
// ajv-formats is CommonJS: Node's default import is its module.exports, the plugin itself, which the package
// also names `.default` (the name its types give it), so `.default` is right at run time and for tsc.
import ajvFormats from "ajv-formats";
import { isRecord } from "../../../conformance/json.ts";
import { type Json, SPEC_URL } from "./types.ts";

export interface Param {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  schema: Json;
  pointer: string;
}

export interface Operation {
  id: string;
  method: string;
  path: string;
  /** "base" or "flow" (per-operation `servers` with a `{flow_url}` variable). */
  server: "base" | "flow";
  params: Param[];
  body?: { required: boolean; schema: Json; validate: ValidateFunction };
  statuses: string[];
  securityHeader?: { name: string; scheme: string };
}

export function pointerEscape(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

export class SpecModel {
  readonly doc: Json;
  readonly ajv: Ajv2020;
  readonly operations: Operation[] = [];
  readonly queryValidators = new Map<string, ValidateFunction>();

  constructor(doc: Json) {
    this.doc = doc;
    this.ajv = new Ajv2020({ strict: false, allErrors: false });
    ajvFormats.default(this.ajv);
    this.ajv.addSchema(doc, "openapi");
    const schemes = ((doc.components as Json).securitySchemes ?? {}) as Record<string, Json>;
    const globalSecurity = (doc.security ?? []) as Json[];
    for (const [path, rawItem] of Object.entries(doc.paths as Json)) {
      const item = rawItem as Json;
      const itemPointer = `/paths/${pointerEscape(path)}`;
      for (const [method, rawOp] of Object.entries(item)) {
        const op = rawOp as Json;
        if (!isRecord(op) || typeof op.operationId !== "string") continue;
        const opPointer = `${itemPointer}/${method}`;
        const params = [
          ...((item.parameters ?? []) as Json[]).map((p, i) =>
            this.#param(p, `${itemPointer}/parameters/${i}`),
          ),
          ...((op.parameters ?? []) as Json[]).map((p, i) => this.#param(p, `${opPointer}/parameters/${i}`)),
        ];
        const requestBody = op.requestBody as Json | undefined;
        const content = (requestBody?.content ?? {}) as Json;
        const body =
          "application/json" in content
            ? {
                required: requestBody?.required === true,
                schema: (content["application/json"] as Json).schema as Json,
                validate: this.ajv.compile({
                  $ref: `openapi#${opPointer}/requestBody/content/application~1json/schema`,
                }),
              }
            : undefined;
        const security = ((op.security ?? globalSecurity) as Json[])[0];
        const schemeName = security ? Object.keys(security)[0] : undefined;
        const scheme = schemeName ? schemes[schemeName] : undefined;
        const servers = (op.servers ?? []) as Json[];
        const server = servers.some((s) => String(s.url).includes("flow_url")) ? "flow" : "base";
        this.operations.push({
          id: op.operationId,
          method: method.toUpperCase(),
          path,
          server,
          params,
          body,
          statuses: Object.keys(op.responses as Json),
          securityHeader:
            scheme && scheme.in === "header"
              ? { name: String(scheme.name), scheme: schemeName as string }
              : undefined,
        });
        const query = params.filter((p) => p.in === "query");
        if (query.length > 0) {
          this.queryValidators.set(
            op.operationId,
            this.ajv.compile({
              type: "object",
              properties: Object.fromEntries(
                query.map((p) => [p.name, { $ref: `openapi#${p.pointer}/schema` }]),
              ),
            }),
          );
        }
      }
    }
  }

  /**
   * The operation a request addresses, as a router of the spec's paths would see it (static paths before
   * templated ones; a trailing slash ignored; a template parameter is one non-empty raw segment).
   */
  match(method: string, rawPath: string): Operation | undefined {
    let path = rawPath.split(/[?#]/)[0];
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const segments = path.split("/");
    const candidates = this.operations
      .filter((op) => op.method === method)
      .sort(
        (a, b) =>
          a.params.filter((p) => p.in === "path").length - b.params.filter((p) => p.in === "path").length,
      );
    return candidates.find((op) => {
      const template = op.path.split("/");
      return (
        template.length === segments.length &&
        template.every((t, i) => (t.startsWith("{") ? segments[i] !== "" : t === segments[i]))
      );
    });
  }

  /** The query string as typed values (integers converted when they are whole numbers); undefined if ambiguous. */
  queryValues(op: Operation, rawPath: string): Record<string, unknown> | undefined {
    const at = rawPath.indexOf("?");
    const values: Record<string, unknown> = {};
    if (at < 0 || (rawPath.indexOf("#") >= 0 && rawPath.indexOf("#") < at)) return values;
    for (const pair of rawPath
      .slice(at + 1)
      .split("#")[0]
      .split("&")) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      let name: string;
      let value: string;
      try {
        name = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
        value = decodeURIComponent(eq < 0 ? "" : pair.slice(eq + 1));
      } catch {
        return undefined;
      }
      if (name in values) return undefined;
      const param = op.params.find((p) => p.in === "query" && p.name === name);
      values[name] =
        param && this.resolve(param.schema).type === "integer" && /^-?\d{1,15}$/.test(value)
          ? Number(value)
          : value;
    }
    return values;
  }

  static load(url: URL = SPEC_URL): SpecModel {
    return new SpecModel(JSON.parse(readFileSync(url, "utf8")) as Json);
  }

  #param(raw: Json, pointer: string): Param {
    let p = raw;
    let at = pointer;
    if (typeof raw.$ref === "string") {
      at = raw.$ref.slice(1);
      p = this.at(at) ?? raw;
    }
    return {
      name: String(p.name),
      in: p.in as Param["in"],
      required: p.required === true,
      schema: (p.schema ?? {}) as Json,
      pointer: at,
    };
  }

  at(pointer: string): Json | undefined {
    let node: unknown = this.doc;
    for (const raw of pointer.split("/").slice(1)) {
      if (!isRecord(node)) return undefined;
      node = node[raw.replaceAll("~1", "/").replaceAll("~0", "~")];
    }
    return isRecord(node) ? node : undefined;
  }

  /** Follows local `$ref`s and merges `allOf` (enough to generate values; ajv stays the judge). */
  resolve(schema: unknown): Json {
    let s = isRecord(schema) ? schema : {};
    for (let hops = 0; hops < 10 && typeof s.$ref === "string"; hops++) s = this.at(s.$ref.slice(1)) ?? {};
    if (Array.isArray(s.allOf)) {
      const parts = (s.allOf as unknown[]).map((p) => this.resolve(p));
      const merged: Json = { type: "object", properties: {}, required: [] };
      for (const part of parts) {
        Object.assign(merged.properties as Json, part.properties ?? {});
        (merged.required as string[]).push(...((part.required ?? []) as string[]));
        if (part.additionalProperties !== undefined) merged.additionalProperties = part.additionalProperties;
      }
      return merged;
    }
    return s;
  }
}
