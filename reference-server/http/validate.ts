/**
 * Request validation from the bundled spec (generated/openapi.json): bodies against their operation's
 * request schema, query strings against the operation's query parameters. The spec is the only place a
 * request's shape is stated; nothing here restates it.
 */
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
// ajv-formats is CommonJS: Node's default import is its module.exports, the plugin itself, which the package
// also names `.default` (the name its types give it), so `.default` is right at run time and for tsc.
import ajvFormats from "ajv-formats";
import { badRequest } from "../errors/catalogue.ts";

const SPEC_URL = new URL("../../generated/openapi.json", import.meta.url);

type Json = Record<string, unknown>;

interface QueryParam {
  name: string;
  schema: Json;
}

interface OperationSchemas {
  body: ValidateFunction | null;
  query: ValidateFunction | null;
  queryParams: QueryParam[];
}

function pointerEscape(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

function describe(errors: ErrorObject[] | null | undefined, where: string): string {
  const first = errors?.[0];
  if (!first) return `${where} is invalid`;
  const path = first.instancePath ? `${where}${first.instancePath.replaceAll("/", ".")}` : where;
  // A pattern is unreadable as an error; the spec says in words what it means (x-pattern-message).
  const patternMessage = (first.parentSchema as Json | undefined)?.["x-pattern-message"];
  if (first.keyword === "pattern" && typeof patternMessage === "string") return `${path} ${patternMessage}`;
  const extra =
    first.keyword === "additionalProperties"
      ? ` (${JSON.stringify((first.params as { additionalProperty?: string }).additionalProperty)})`
      : first.keyword === "enum"
        ? ` (${((first.params as { allowedValues?: unknown[] }).allowedValues ?? []).join(", ")})`
        : "";
  return `${path} ${first.message ?? "is invalid"}${extra}`;
}

export class RequestValidator {
  readonly #ops = new Map<string, OperationSchemas>();
  readonly #inputMessage: ValidateFunction;

  constructor(doc: Json = JSON.parse(readFileSync(SPEC_URL, "utf8")) as Json) {
    const ajv = new Ajv2020({ strict: false, allErrors: false, useDefaults: false, verbose: true });
    ajvFormats.default(ajv);
    ajv.addSchema(doc, "openapi");
    this.#inputMessage = ajv.compile({ $ref: "openapi#/components/schemas/InputMessage" });
    const parameters = ((doc.components as Json | undefined)?.parameters ?? {}) as Record<string, Json>;
    /** A parameter and the JSON pointer of its object, following one local `$ref`. */
    const located = (p: Json, pointer: string): { param: Json; pointer: string } => {
      if (typeof p.$ref !== "string") return { param: p, pointer };
      const name = p.$ref.split("/").pop() ?? "";
      return { param: parameters[name] ?? p, pointer: p.$ref.slice(1) };
    };
    for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
      const itemPointer = `/paths/${pointerEscape(path)}`;
      const shared = ((item.parameters ?? []) as Json[]).map((p, i) =>
        located(p, `${itemPointer}/parameters/${i}`),
      );
      for (const [method, raw] of Object.entries(item)) {
        const op = raw as Json;
        if (typeof op?.operationId !== "string") continue;
        const pointer = `${itemPointer}/${method}`;
        const content = ((op.requestBody as Json | undefined)?.content ?? {}) as Json;
        const body =
          "application/json" in content
            ? ajv.compile({ $ref: `openapi#${pointer}/requestBody/content/application~1json/schema` })
            : null;
        const own = ((op.parameters ?? []) as Json[]).map((p, i) => located(p, `${pointer}/parameters/${i}`));
        const inQuery = [...shared, ...own].filter((p) => p.param.in === "query");
        const queryParams = inQuery.map((p) => ({
          name: String(p.param.name),
          schema: p.param.schema as Json,
        }));
        const query =
          inQuery.length === 0
            ? null
            : ajv.compile({
                type: "object",
                properties: Object.fromEntries(
                  inQuery.map((p) => [String(p.param.name), { $ref: `openapi#${p.pointer}/schema` }]),
                ),
              });
        this.#ops.set(op.operationId, { body, query, queryParams });
      }
    }
  }

  /** Throws 400 with the first violation when `body` does not match the operation's request schema. */
  body(operationId: string, body: unknown): void {
    const validate = this.#ops.get(operationId)?.body;
    if (!validate) return;
    if (body === undefined) throw badRequest("A JSON request body is required");
    if (!validate(body)) throw badRequest(describe(validate.errors, "body"));
  }

  /**
   * The send routes read only the newest `messages` element with `role` `user` (SendMessageRequest): that one
   * must be there and be an `InputMessage`; the request schema asks nothing more of the others than a role.
   * Call after `body()`, which guarantees `messages` is a non-empty array of objects with a string `role`.
   */
  newestUserMessage(body: { messages: Array<{ role: string }> }): void {
    const index = body.messages.findLastIndex((m) => m.role === "user");
    if (index < 0) throw badRequest('body.messages has no element with role "user"');
    if (!this.#inputMessage(body.messages[index]))
      throw badRequest(describe(this.#inputMessage.errors, `body.messages.${index}`));
  }

  /**
   * Checks and types the query string: integer parameters arrive as text and are converted only when they
   * are whole numbers, so `limit=abc` or `limit=1.5` fail against the schema instead of being guessed at.
   */
  query(operationId: string, raw: Record<string, unknown>): Record<string, unknown> {
    const op = this.#ops.get(operationId);
    if (!op?.query) return {};
    const typed: Record<string, unknown> = {};
    for (const param of op.queryParams) {
      const value = raw[param.name];
      if (value === undefined) continue;
      if (Array.isArray(value)) throw badRequest(`query parameter ${param.name} is given more than once`);
      typed[param.name] =
        param.schema.type === "integer" && /^-?\d{1,15}$/.test(String(value)) ? Number(value) : value;
    }
    if (!op.query(typed)) throw badRequest(describe(op.query.errors, "query"));
    return typed;
  }
}
