/**
 * Spec-driven fuzzing of a running deployment with fast-check. For every operation of the bundled spec
 * (generated/openapi.json) it derives arbitraries from the operation's parameters, request schema and
 * security scheme: valid requests, and invalid ones (wrong types, missing required fields, extra fields,
 * huge strings up to 1 MiB, unicode with lone surrogates/NUL/RTL marks, boundary integers, bad JSON, wrong
 * content types, hostile path segments). Each request goes to the server for real, and its response is
 * judged:
 *
 * - never a 5xx, never a dropped connection or a hang, and the server still answers afterwards;
 * - the status is one the spec documents for the operation, and the body matches the spec for it
 *   (conformance/spec-validator.ts); a 200 event stream follows the turn grammar and each event's data
 *   matches its event schema;
 * - a request the spec refuses (by the same schemas) is never answered 2xx;
 * - data created before fuzzing (conversations with transcripts, one shared, one in another workspace)
 *   is byte-identical afterwards. Its owner's key is only ever used for reads and for requests the spec
 *   refuses, so any change to it is a fault.
 *
 * `runFuzz` returns figures and findings; it asserts nothing itself (fuzz.test.ts and bench/fuzz.ts do).
 *
 * One module per part: the spec's operations (spec-model.ts), hostile values (hostile-values.ts), values
 * from schemas (schema-values.ts), mutations that make them invalid (mutations.ts), body encodings and
 * content types (encodings.ts), whole requests (requests.ts), sending (transport.ts), judging a response
 * (judge.ts), the protected data (protected-data.ts), the run (run.ts), classes of findings (findings.ts),
 * the demo's options (demo-options.ts) and the summary (report.ts).
 */
export { demoFuzzOptions } from "./demo-options.ts";
export { classOf, KNOWN_SPEC_GAPS, knownSpecGap } from "./findings.ts";
export { encodeSegment } from "./hostile-values.ts";
export { formatReport } from "./report.ts";
export { runFuzz } from "./run.ts";
export { SpecModel } from "./spec-model.ts";
export {
  type Finding,
  type FuzzAgents,
  type FuzzKeys,
  type FuzzOptions,
  type FuzzReport,
  SPEC_URL,
} from "./types.ts";
