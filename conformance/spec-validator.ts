/**
 * Validates what a deployment sends against the bundled spec (generated/openapi.json): JSON response
 * bodies found by operationId + status + media type, and SSE event data by their event schema.
 * A schema (or response) carrying `x-reference-behavior` describes "not shown" behaviour, and so do error
 * bodies: those are not judged here at all (media type, JSON or shape); the checks that need a fixed
 * error body (the revoked key, `Conversation not found`) judge it themselves.
 */
import { readFile } from "node:fs/promises";
import { streamEventSchemas } from "@agent-api/client/protocol";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
// ajv-formats is CommonJS: Node's default import is its module.exports, the plugin itself, which the package
// also names `.default` (the name its types give it), so `.default` is right at run time and for tsc.
import ajvFormats from "ajv-formats";
import { isRecord } from "./json.ts";
import type { FailureDetail } from "./records.ts";

export const DEFAULT_SPEC_URL = new URL("../generated/openapi.json", import.meta.url);

// Each event is judged by its own schema: the discriminated StreamEvent union gives unreadable oneOf errors.
const eventSchemas: Record<string, string | undefined> = streamEventSchemas;

type Json = Record<string, unknown>;

function pointerEscape(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

export class SpecValidator {
  readonly #doc: Json;
  readonly #ajv: Ajv2020;
  readonly #compiled = new Map<string, ValidateFunction>();
  /** operationId → JSON pointer of its operation object. */
  readonly #operations = new Map<string, string>();

  constructor(doc: Json) {
    this.#doc = doc;
    this.#ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    ajvFormats.default(this.#ajv);
    this.#ajv.addSchema(doc, "openapi");
    const paths = isRecord(doc.paths) ? doc.paths : {};
    for (const [path, item] of Object.entries(paths)) {
      if (!isRecord(item)) continue;
      for (const [method, op] of Object.entries(item)) {
        if (isRecord(op) && typeof op.operationId === "string") {
          this.#operations.set(op.operationId, `/paths/${pointerEscape(path)}/${method}`);
        }
      }
    }
  }

  static async load(url: URL | string = DEFAULT_SPEC_URL): Promise<SpecValidator> {
    const text = await readFile(url, "utf8");
    return new SpecValidator(JSON.parse(text) as Json);
  }

  hasOperation(operationId: string): boolean {
    return this.#operations.has(operationId);
  }

  /**
   * Violations of a response against the spec; [] when it conforms or the spec documents nothing to check
   * (an undocumented status is the business of the check that expects a status, not of the schema).
   */
  validateResponse(
    operationId: string,
    status: number,
    contentType: string | undefined,
    body: string,
  ): FailureDetail[] {
    const opPointer = this.#operations.get(operationId);
    if (!opPointer) return [];
    const op = this.#at(opPointer);
    const responses = isRecord(op?.responses) ? op.responses : {};
    const key = [String(status), `${String(status)[0]}XX`, "default"].find((k) => k in responses);
    if (!key) return [];
    // Error bodies are "not shown" by the API (but the revoked-key body and the 404 message, which their
    // own checks judge): a deployment may answer them in any media type, even empty or as a proxy's page.
    if (status >= 400) return [];
    let responsePointer = `${opPointer}/responses/${key}`;
    const response = this.#deref(responsePointer);
    responsePointer = response.pointer;
    const responseObject = response.value;
    const content = isRecord(responseObject?.content) ? responseObject.content : undefined;
    if (!content) return [];
    // A body the API leaves "not shown" (share toggle, flow result) may be anything, even empty.
    if (responseObject && "x-reference-behavior" in responseObject) return [];
    const firstSchema = Object.values(content).find(isRecord)?.schema;
    if (isRecord(firstSchema) && typeof firstSchema.$ref === "string" && firstSchema.$ref.startsWith("#")) {
      if (this.#deref(firstSchema.$ref.slice(1)).value?.["x-reference-behavior"] !== undefined) return [];
    }
    const media = (contentType ?? "").split(";")[0].trim().toLowerCase();
    const documented = Object.keys(content);
    if (!documented.includes(media)) {
      return [
        {
          message: `response ${status} has Content-Type ${JSON.stringify(contentType ?? null)}; the spec documents ${documented.join(", ")}`,
          pointer: "",
          schemaPath: `${responsePointer}/content`,
        },
      ];
    }
    if (!media.endsWith("json")) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return [{ message: `response ${status} body is not JSON`, pointer: "", evidence: body.slice(0, 300) }];
    }
    if (responseObject && "x-reference-behavior" in responseObject) return [];
    const schemaPointer = `${responsePointer}/content/${pointerEscape(media)}/schema`;
    if (this.#deref(schemaPointer).value?.["x-reference-behavior"] !== undefined) return [];
    return this.#validate(schemaPointer, parsed);
  }

  /** Violations of one SSE event's data against its event schema. */
  validateEvent(name: string, data: unknown): FailureDetail[] {
    const schema = eventSchemas[name] ?? "StreamEvent";
    return this.#validate(`/components/schemas/${schema}`, data).map((d) => ({
      ...d,
      message: `event ${name}: ${d.message}`,
    }));
  }

  #validate(pointer: string, value: unknown): FailureDetail[] {
    let validate = this.#compiled.get(pointer);
    if (!validate) {
      validate = this.#ajv.compile({ $ref: `openapi#${pointer}` });
      this.#compiled.set(pointer, validate);
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).slice(0, 10).map((e: ErrorObject) => ({
      message: `${e.instancePath || "(root)"} ${e.message ?? "is invalid"}${e.params && "allowedValue" in e.params ? ` (${JSON.stringify(e.params.allowedValue)})` : ""}`,
      pointer: e.instancePath,
      schemaPath: `${pointer} ${e.schemaPath}`,
      evidence: excerptOf(value),
    }));
  }

  #at(pointer: string): Json | undefined {
    let node: unknown = this.#doc;
    for (const raw of pointer.split("/").slice(1)) {
      const segment = raw.replaceAll("~1", "/").replaceAll("~0", "~");
      if (!isRecord(node) && !Array.isArray(node)) return undefined;
      node = (node as Json)[segment];
    }
    return isRecord(node) ? node : undefined;
  }

  /** Follows local `$ref`s (bundled specs keep shared responses and schemas under components). */
  #deref(pointer: string): { pointer: string; value: Json | undefined } {
    let current = pointer;
    for (let hops = 0; hops < 10; hops++) {
      const value = this.#at(current);
      if (!value || typeof value.$ref !== "string" || !value.$ref.startsWith("#"))
        return { pointer: current, value };
      current = value.$ref.slice(1);
    }
    return { pointer: current, value: undefined };
  }
}

function excerptOf(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}
