/** How much of a request the server reads and how long it waits for it: the body limit and the slow-client deadlines. */

/** Largest request body accepted (the API leaves it "not shown"); attachments alone may reach 10 MiB decoded. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/**
 * A client that sends its request slowly holds a socket and, once admitted, its share of the body caps:
 * the head must arrive within 20 s, head and body within 120 s (a 32 MiB body needs ~270 KiB/s). Only the
 * request is timed: Node clears the deadline once the request is complete, so a turn's stream runs on
 * (no socket idle time-out either: a quiet turn is kept alive by comment lines, a stalled reader by
 * sse.ts's stall time-out).
 */
export const SLOW_CLIENT_DEFAULTS = { requestTimeoutMs: 120_000, headersTimeoutMs: 20_000 } as const;
