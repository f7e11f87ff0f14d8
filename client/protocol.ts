/**
 * The protocol constants and their types, generated from the spec (generated/protocol.ts), as the package's
 * `@agent-api/client/protocol` export: the suite and the server import them from here, by package name.
 */
export * from "../generated/protocol.ts";
