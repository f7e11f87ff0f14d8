/**
 * The contract covers what the API defines: each operation, each status of the API's error table on the
 * right operation, each SSE event as a named schema, the header, the bounds and the security schemes.
 * It reads generated/openapi.json (the bundle of spec/), and checks that the bundle is up to date and
 * that Redocly lints the spec with zero problems, so a deletion in spec/ fails here one way or the other.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { runTool, specPath, tools } from "../conformance/cli/tool-bin.ts";
import { streamEventSchemas } from "../generated/protocol.ts";
import { renderGenerated } from "../scripts/generate.ts";
import { projectRoot } from "../scripts/project-root.ts";

// The bundled document is JSON of arbitrary depth; tests index into it by the spec's own names.
// biome-ignore lint/suspicious/noExplicitAny: walking an untyped JSON document
type Json = any;
const bundlePath = join(projectRoot, "generated", "openapi.json");
const doc: Json = JSON.parse(readFileSync(bundlePath, "utf8"));
const schemas: Json = doc.components.schemas;

const deref = (node: Json): Json => {
  if (node && typeof node.$ref === "string") {
    const path = node.$ref.replace(/^#\//, "").split("/");
    return deref(path.reduce((at: Json, key: string) => at[key], doc));
  }
  return node;
};

const operations: Record<string, { method: string; path: string; op: Json }> = {};
for (const [path, item] of Object.entries<Json>(doc.paths)) {
  for (const method of ["get", "post", "delete", "put", "patch"]) {
    if (item[method]) operations[item[method].operationId] = { method, path, op: item[method] };
  }
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema(doc, "openapi.json");
const validator = (name: string) => {
  const validate = ajv.getSchema(`openapi.json#/components/schemas/${name}`);
  if (!validate) throw new Error(`no schema ${name}`);
  return validate;
};

describe("operations", () => {
  const expected: Record<string, [string, string, string[]]> = {
    sendMessage: [
      "post",
      "/api/agents/{agent}/v1/messages",
      ["200", "400", "401", "403", "404", "413", "501", "429", "503"],
    ],
    sendRoutedMessage: [
      "post",
      "/api/agents/v1/messages",
      ["200", "400", "401", "403", "404", "413", "501", "429", "503"],
    ],
    listModels: ["get", "/api/agents/{agent}/v1/models", ["200", "400", "401", "404", "429", "503"]],
    listConversations: [
      "get",
      "/api/agents/{agent}/conversations",
      ["200", "400", "401", "404", "429", "503"],
    ],
    getConversation: [
      "get",
      "/api/agents/{agent}/conversations/{id}",
      ["200", "400", "401", "404", "429", "503"],
    ],
    getTranscript: [
      "get",
      "/api/agents/{agent}/conversations/{id}/messages",
      ["200", "400", "401", "404", "429", "503"],
    ],
    getLastCompaction: [
      "get",
      "/api/agents/{agent}/conversations/{id}/last-compaction",
      ["200", "400", "401", "404", "429", "503"],
    ],
    setConversationSharing: [
      "post",
      "/api/agents/{agent}/conversations/{id}",
      ["200", "400", "401", "403", "404", "429", "503"],
    ],
    forkConversation: [
      "post",
      "/api/agents/{agent}/conversations/{id}/fork",
      ["200", "400", "401", "404", "409", "429", "503"],
    ],
    deleteConversation: [
      "delete",
      "/api/agents/{agent}/conversations/{id}",
      ["204", "400", "401", "403", "404", "429", "503"],
    ],
    invokeFlow: ["post", "/apps/{app_id}", ["200", "400", "401", "404", "502", "429", "503"]],
  };

  it("has exactly the 11 operations of the API", () => {
    expect(Object.keys(operations).sort()).toEqual(Object.keys(expected).sort());
  });

  it.each(Object.entries(expected))(
    "%s: method, path and every status of the API",
    (id, [method, path, statuses]) => {
      expect(operations[id]).toMatchObject({ method, path });
      expect(Object.keys(operations[id].op.responses).sort()).toEqual([...statuses].sort());
    },
  );

  it("every operation has a summary, a tag and an example on each body", () => {
    for (const { op } of Object.values(operations)) {
      expect(op.summary).toBeTruthy();
      expect(op.tags?.length).toBeGreaterThan(0);
      const bodies = [op.requestBody, ...Object.values(op.responses)].map(deref).filter((b) => b?.content);
      for (const body of bodies) {
        for (const media of Object.values<Json>(body.content))
          expect(media.examples ?? media.example).toBeDefined();
      }
    }
  });

  it("both sends answer 200 text/event-stream with a required X-Conversation-Id header", () => {
    for (const id of ["sendMessage", "sendRoutedMessage"]) {
      const ok = deref(operations[id].op.responses["200"]);
      expect(Object.keys(ok.content)).toEqual(["text/event-stream"]);
      expect(deref(ok.headers["X-Conversation-Id"])).toMatchObject({
        required: true,
        schema: { type: "string" },
      });
    }
  });

  it("each SSE event is described (OpenAPI 3.2 itemSchema): every event name, its data one StreamEvent as JSON", () => {
    expect(doc.openapi).toMatch(/^3\.2\./);
    for (const id of ["sendMessage", "sendRoutedMessage"]) {
      const stream = deref(operations[id].op.responses["200"]).content["text/event-stream"];
      const item = deref(stream.itemSchema);
      expect(item.required).toEqual(["event", "data"]);
      expect(item.properties.event.enum).toEqual(Object.keys(streamEventSchemas));
      expect(item.properties.data).toMatchObject({
        type: "string",
        contentMediaType: "application/json",
        contentSchema: { $ref: "#/components/schemas/StreamEvent" },
      });
    }
  });

  it("401 documents the revoked-key body exactly, 404 the `Conversation not found` message", () => {
    const unauthorized = deref(operations.sendMessage.op.responses["401"]).content["application/json"];
    expect(deref(unauthorized.examples.revoked).value).toEqual({ message: "API key has been revoked" });
    expect(validator("RevokedKeyErrorBody")({ message: "API key has been revoked" })).toBe(true);
    expect(validator("RevokedKeyErrorBody")({ message: "other" })).toBe(false);
    const notFound = deref(operations.getConversation.op.responses["404"]).content["application/json"];
    expect(deref(notFound.examples.conversationNotFound).value.message).toBe("Conversation not found");
  });

  it("the model-routed send requires `model`", () => {
    const schema = operations.sendRoutedMessage.op.requestBody.content["application/json"].schema;
    const validate = ajv.compile({
      $ref: "openapi.json#/paths/~1api~1agents~1v1~1messages/post/requestBody/content/application~1json/schema",
    });
    expect(schema.allOf).toBeDefined();
    expect(validate({ messages: [{ role: "user", content: "hi" }] })).toBe(false);
    expect(validate({ model: "acme-bot", messages: [{ role: "user", content: "hi" }] })).toBe(true);
  });
});

describe("parameters and bodies", () => {
  const parameter = (id: string, name: string) =>
    operations[id].op.parameters.map(deref).find((p: Json) => p.name === name);

  it("list conversations: limit 1..200 default 50, channel enum, since any ISO 8601 string", () => {
    expect(parameter("listConversations", "limit").schema).toMatchObject({
      type: "integer",
      minimum: 1,
      maximum: 200,
      default: 50,
    });
    expect(deref(parameter("listConversations", "channel").schema).enum).toEqual([
      "INTERACTIVE",
      "NOTEBOOK",
      "SLACK",
      "EMAIL",
    ]);
    // The API says only "ISO 8601": RFC 3339's date-time would refuse `2026-11-01`.
    expect(parameter("listConversations", "since").schema).toEqual({ type: "string" });
    for (const name of ["channel_id", "notebook_path", "automation"])
      expect(parameter("listConversations", name)).toBeDefined();
  });

  it("send-message: messages non-empty, ignored fields accepted, metadata defaults", () => {
    const send = validator("SendMessageRequest");
    expect(send({ messages: [] })).toBe(false);
    expect(send({})).toBe(false);
    expect(
      send({ messages: [{ role: "user", content: "hi" }], max_tokens: 5, tools: [], temperature: 1 }),
    ).toBe(true);
    const meta = schemas.RequestMetadata.properties;
    expect(meta.stream_tool_calls.default).toBe(false);
    expect(meta.read_only.default).toBe(true);
    expect(meta.isolated.default).toBe(false);
    expect(meta.delivery).toMatchObject({ enum: ["sync", "async"], default: "sync" });
    for (const name of ["conversation_id", "attachments", "automation", "builder", "test"])
      expect(meta[name]).toBeDefined();
  });

  it("malformed and excess attachments are not rejected (they are dropped silently)", () => {
    const send = validator("SendMessageRequest");
    const good = { name: "a.txt", mediaType: "text/plain", dataBase64: "YQ==" };
    const eleven = Array.from({ length: 11 }, () => good);
    expect(
      send({
        messages: [{ role: "user", content: "x" }],
        metadata: { attachments: [{ name: 5 }, "junk", ...eleven] },
      }),
    ).toBe(true);
    expect(schemas.RequestMetadata.properties.attachments["x-limits"]).toEqual({
      maxFiles: 10,
      maxDecodedBytesTotal: 10 * 1024 * 1024,
    });
    expect(schemas.Attachment.required).toEqual(["name", "mediaType", "dataBase64"]);
  });

  it("share body is exactly {shared: boolean}; fork body rejects unknown fields", () => {
    const share = validator("ShareRequest");
    expect(share({ shared: true })).toBe(true);
    expect(share({ shared: "yes" })).toBe(false);
    expect(share({ shared: true, extra: 1 })).toBe(false);
    expect(share({})).toBe(false);
    const fork = validator("ForkRequest");
    expect(fork({})).toBe(true);
    expect(fork({ at_turn: -1 })).toBe(false);
    expect(fork({ nope: 1 })).toBe(false);
  });

  it("the Conversation has the API's fields, nullable where the API says so", () => {
    const conversation = schemas.Conversation;
    expect(conversation.required.sort()).toEqual(
      [
        "id",
        "title",
        "channel",
        "shared",
        "is_owner",
        "agent_session_id",
        "parent_conversation_id",
        "forked_at_turn_index",
        "created_at",
        "updated_at",
        "turn_count",
      ].sort(),
    );
    for (const name of ["agent_session_id", "parent_conversation_id", "forked_at_turn_index"]) {
      expect(conversation.properties[name].type).toContain("null");
    }
  });

  it("`not shown` shapes carry x-reference-behavior and require nothing", () => {
    for (const name of ["ShareResult", "FlowInvokeResult", "ErrorBody"]) {
      expect(typeof schemas[name]["x-reference-behavior"]).toBe("string");
      expect(schemas[name].required).toBeUndefined();
    }
  });
});

describe("stream events", () => {
  // The API's seven events; generated/protocol.ts must name the same, each with its schema.
  const seedEvents = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
  ];
  const eventSchemas: Record<string, string> = streamEventSchemas;

  it("the protocol module names exactly the API's events", () => {
    expect(Object.keys(eventSchemas).sort()).toEqual([...seedEvents].sort());
  });

  it("StreamEvent is the union of one named schema per event, each fixing its type", () => {
    const members = schemas.StreamEvent.oneOf.map((m: Json) => m.$ref.split("/").at(-1));
    expect(members.sort()).toEqual(Object.values(eventSchemas).sort());
    for (const [type, name] of Object.entries(eventSchemas))
      expect(schemas[name].properties.type.const).toBe(type);
  });

  it("content blocks and deltas cover the API's types", () => {
    const blocks = schemas.ContentBlockStartEvent.properties.content_block;
    expect(Object.keys(blocks.discriminator.mapping).sort()).toEqual([
      "text",
      "thinking",
      "tool_result",
      "tool_use",
    ]);
    const deltas = schemas.ContentBlockDeltaEvent.properties.delta;
    expect(Object.keys(deltas.discriminator.mapping).sort()).toEqual([
      "input_json_delta",
      "signature_delta",
      "text_delta",
      "thinking_delta",
    ]);
    expect(schemas.ToolResultContentBlock.required).toEqual(["type", "tool_use_id", "content", "is_error"]);
  });

  it("usage: message_delta carries the five fields, message_start needs id, model, usage", () => {
    expect(schemas.StreamUsage.required.sort()).toEqual(
      [
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "input_tokens",
        "output_tokens",
        "total_cost_usd",
      ].sort(),
    );
    expect(schemas.MessageStartEvent.properties.message.required).toEqual(["id", "model", "usage"]);
  });

  it("the example streams parse, name each event by its type and validate as exactly one StreamEvent", () => {
    const examples = deref(operations.sendMessage.op.responses["200"]).content["text/event-stream"].examples;
    const seen = new Set<string>();
    for (const example of Object.values<Json>(examples)) {
      const frames = deref(example).value.trim().split("\n\n");
      for (const frame of frames) {
        const [, name] = /^event: (\w+)$/m.exec(frame) ?? [];
        const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "null");
        expect(data.type).toBe(name);
        const validate = validator("StreamEvent");
        expect(validate(data), JSON.stringify(validate.errors)).toBe(true);
        seen.add(name === "content_block_start" ? `start:${data.content_block.type}` : name);
      }
    }
    expect([...seen].sort()).toEqual(
      [
        "content_block_delta",
        "content_block_stop",
        "error",
        "message_delta",
        "message_start",
        "message_stop",
        "start:text",
        "start:thinking",
        "start:tool_result",
        "start:tool_use",
      ].sort(),
    );
  });

  it("the API's error event (no type) is a StreamEvent; message_stop cannot be mistaken for it", () => {
    const validate = validator("StreamEvent");
    expect(validate({ error: { type: "api_error", message: "x" } })).toBe(true);
    expect(validate({ type: "message_stop" })).toBe(true);
    expect(validate({ type: "message_stop", error: { type: "api_error", message: "x" } })).toBe(true);
    expect(validate({ type: "nope" })).toBe(false);
  });
});

describe("servers and security", () => {
  it("the agents API on {base_url} with X-Api-Key; the flow on {flow_url} with X-API-Key", () => {
    expect(doc.servers[0].url).toBe("{base_url}");
    expect(doc.security).toEqual([{ ApiKey: [] }]);
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({
      type: "apiKey",
      in: "header",
      name: "X-Api-Key",
    });
    expect(doc.components.securitySchemes.FlowApiKey).toMatchObject({
      type: "apiKey",
      in: "header",
      name: "X-API-Key",
    });
    const flow = operations.invokeFlow.op;
    expect(flow.servers[0].url).toBe("{flow_url}");
    expect(flow.security).toEqual([{ FlowApiKey: [] }]);
  });
});

describe("tooling", () => {
  it("generated/ is what `npm run generate` makes from spec/", async () => {
    const files = await renderGenerated();
    for (const [name, content] of Object.entries(files)) {
      expect(
        content === readFileSync(join(projectRoot, "generated", name), "utf8"),
        `generated/${name} is stale`,
      ).toBe(true);
    }
  });

  it("Redocly lints the spec with zero errors and zero warnings", async () => {
    const result = await runTool(tools.redocly(), ["lint", specPath, "--format", "json"]);
    const report = JSON.parse(result.stdout);
    const problems = report.problems.filter((p: Json) => !p.ignored);
    expect(problems.map((p: Json) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(result.code).toBe(0);
  });
});
