/** A JSON object (not an array, not null): what a response body or an event's data must be to be read further. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
