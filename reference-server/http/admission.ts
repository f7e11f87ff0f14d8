/**
 * Caps on the requests one server instance holds at once, per API key and in all: how many are in flight
 * (from their head to the end of their response, a turn's stream included) and how many bytes of request
 * body they carry. A body is held from its first byte to the end of its response (a waiting turn keeps its
 * parsed body), so the body bytes held, not the request count, are what bound the server's memory.
 *
 * The count and a body's declared length (`Content-Length`) are checked when the head arrives, before a
 * byte of body is read; a body of unknown length (chunked) is counted as it arrives. Over a key's cap the
 * answer is 429; over the server's, 503 (every caller is refused alike); both with `Retry-After`.
 *
 * Once the key is known to belong to a workspace (`attribute`), the request also counts against that
 * workspace's share, below the server's cap: one workspace's keys together cannot fill the server, so the
 * others always find room (429 for the workspace over its share, never a 503 for everyone).
 */
import type { IncomingHttpHeaders } from "node:http";
import { Transform, type TransformCallback } from "node:stream";
import { overCap } from "../errors/catalogue.ts";

export interface AdmissionLimits {
  /** Requests in flight on the whole instance. */
  requestsPerServer: number;
  /** Requests in flight of one API key (or one flow). */
  requestsPerKey: number;
  /** Request body bytes held on the whole instance. */
  bodyBytesPerServer: number;
  /** Request body bytes held for one API key (or one flow). */
  bodyBytesPerKey: number;
  /** Requests in flight of one workspace's keys and flows together. */
  requestsPerWorkspace: number;
  /** Request body bytes held for one workspace. */
  bodyBytesPerWorkspace: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_ADMISSION_LIMITS: AdmissionLimits = {
  // The several-instances benchmark runs 1,000 turns in flight on one instance, with one key.
  requestsPerServer: 4096,
  requestsPerKey: 2048,
  // The conformance suite's attachment check sends ~14.7 MB; the mutation self-test runs 12 suites at once
  // with one key, so up to ~176 MB of them can coincide. Measured under a flood of 32 MiB bodies, each body
  // byte held costs 2-3 bytes of memory (raw chunks, the string, the parsed value): see README "Limits".
  bodyBytesPerServer: 256 * MiB,
  bodyBytesPerKey: 192 * MiB,
  // Three quarters of the server's: a quarter of it stays free for the other workspaces, whatever one does.
  requestsPerWorkspace: 3072,
  bodyBytesPerWorkspace: 224 * MiB,
};

/** Seconds a refused request is told to wait: pending work here drains within about a turn. */
const RETRY_AFTER_S = 1;

interface Usage {
  requests: number;
  bodyBytes: number;
}

/**
 * What one admitted request holds. `release` (idempotent, called when the response is over) gives it all
 * back, unless work of the request still runs under `hold`: then it is given back when that work ends.
 */
export interface AdmissionTicket {
  /** Counts `bytes` more of body (a chunked body as it arrives); throws 429/503 over a cap. */
  reserve(bytes: number): void;
  /** Body bytes counted so far. */
  readonly bodyBytes: number;
  /**
   * Counts the request, and its body from now on, against `workspace`'s share too (once its key is known);
   * throws 429 over it. A second call is ignored.
   */
  attribute(workspace: string): void;
  /**
   * Keeps the ticket while the request's work runs, whether or not its client is still there: a turn
   * waiting for its conversation's lock holds its parsed body after its client left. Returns the unhold.
   */
  hold(): () => void;
  release(): void;
}

export class Admission {
  readonly #limits: AdmissionLimits;
  readonly #server: Usage = { requests: 0, bodyBytes: 0 };
  readonly #byKey = new Map<string, Usage>();
  readonly #byWorkspace = new Map<string, Usage>();

  constructor(limits: Partial<AdmissionLimits> = {}) {
    this.#limits = { ...DEFAULT_ADMISSION_LIMITS, ...limits };
  }

  get limits(): AdmissionLimits {
    return this.#limits;
  }

  /** What is held right now (0 and 0 when no request is in flight). */
  live(): { requestsInFlight: number; bodyBytesHeld: number } {
    return { requestsInFlight: this.#server.requests, bodyBytesHeld: this.#server.bodyBytes };
  }

  /** Admits one request of `key` declaring `declaredBytes` of body, or throws 429/503. */
  admit(key: string, declaredBytes: number): AdmissionTicket {
    const limits = this.#limits;
    const server = this.#server;
    const mine = this.#byKey.get(key) ?? { requests: 0, bodyBytes: 0 };
    if (server.requests >= limits.requestsPerServer)
      throw overCap("server", "Too many requests are already in flight on this server", RETRY_AFTER_S);
    if (mine.requests >= limits.requestsPerKey)
      throw overCap("key", "Too many requests of this key are already in flight", RETRY_AFTER_S);
    this.#checkBytes(mine, declaredBytes);
    const byKey = this.#byKey;
    byKey.set(key, mine);
    server.requests++;
    mine.requests++;
    let held = 0;
    let released = false;
    let holds = 0;
    let closed = false;
    let workspaceName: string | undefined;
    let workspace: Usage | undefined;
    const byWorkspace = this.#byWorkspace;
    const reserve = (bytes: number) => {
      if (released || bytes <= 0) return;
      this.#checkBytes(mine, bytes);
      if (workspace && workspace.bodyBytes + bytes > limits.bodyBytesPerWorkspace)
        throw overCap(
          "workspace",
          "Too many request body bytes of this workspace are already in flight",
          RETRY_AFTER_S,
        );
      held += bytes;
      mine.bodyBytes += bytes;
      server.bodyBytes += bytes;
      if (workspace) workspace.bodyBytes += bytes;
    };
    reserve(declaredBytes);
    return {
      reserve,
      get bodyBytes() {
        return held;
      },
      attribute: (name: string) => {
        if (released || workspace) return;
        const usage = byWorkspace.get(name) ?? { requests: 0, bodyBytes: 0 };
        if (usage.requests >= limits.requestsPerWorkspace)
          throw overCap(
            "workspace",
            "Too many requests of this workspace are already in flight",
            RETRY_AFTER_S,
          );
        if (usage.bodyBytes + held > limits.bodyBytesPerWorkspace)
          throw overCap(
            "workspace",
            "Too many request body bytes of this workspace are already in flight",
            RETRY_AFTER_S,
          );
        byWorkspace.set(name, usage);
        usage.requests++;
        usage.bodyBytes += held;
        workspace = usage;
        workspaceName = name;
      },
      hold: () => {
        holds++;
        let unheld = false;
        return () => {
          if (unheld) return;
          unheld = true;
          holds--;
          if (closed && holds === 0) giveBack();
        };
      },
      release: () => {
        closed = true;
        if (holds === 0) giveBack();
      },
    };

    function giveBack(): void {
      if (released) return;
      released = true;
      server.requests--;
      server.bodyBytes -= held;
      mine.requests--;
      mine.bodyBytes -= held;
      if (mine.requests === 0) byKey.delete(key);
      if (workspace && workspaceName !== undefined) {
        workspace.requests--;
        workspace.bodyBytes -= held;
        if (workspace.requests === 0) byWorkspace.delete(workspaceName);
      }
    }
  }

  #checkBytes(mine: Usage, bytes: number): void {
    if (bytes <= 0) return;
    const limits = this.#limits;
    if (this.#server.bodyBytes + bytes > limits.bodyBytesPerServer)
      throw overCap(
        "server",
        "Too many request body bytes are already in flight on this server",
        RETRY_AFTER_S,
      );
    if (mine.bodyBytes + bytes > limits.bodyBytesPerKey)
      throw overCap("key", "Too many request body bytes of this key are already in flight", RETRY_AFTER_S);
  }
}

/** The declared body length, or 0 when none is declared (no body, or a chunked one counted as it comes). */
export function declaredLength(headers: IncomingHttpHeaders): number {
  const value = headers["content-length"];
  if (value === undefined || !/^\d{1,16}$/.test(value)) return 0;
  return Number(value);
}

/**
 * Passes a body of unknown length through, counting each chunk against the ticket; over a cap the body
 * fails with the cap's ApiError (the error handler answers it) and nothing more of it is read.
 */
export function countedBody(ticket: AdmissionTicket): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      try {
        ticket.reserve(chunk.length);
        callback(null, chunk);
      } catch (error) {
        callback(error as Error);
      }
    },
  });
}
