/** Running. */

import { Pool } from "undici";

export interface Sent {
  status: number;
  headers: Record<string, string>;
  bytes: Buffer;
}

/** Node's default limit for a request's head (request line and headers) is 16 KiB. */
export const LARGE_HEAD_BYTES = 12_000;

export function headSize(path: string, headers: Record<string, string>): number {
  let size = path.length + 32;
  for (const [name, value] of Object.entries(headers)) size += name.length + value.length + 4;
  return size;
}

export class Transport {
  readonly #pools = new Map<string, Pool>();
  readonly #connections: number;
  constructor(connections: number) {
    this.#connections = connections;
  }
  async send(
    origin: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Buffer | undefined,
    timeoutMs: number,
  ): Promise<Sent> {
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, { connections: this.#connections, keepAliveTimeout: 5_000 });
      this.#pools.set(origin, pool);
    }
    const res = await pool.request({
      method: method as "GET",
      path,
      headers,
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // A request head past the server's header limit gets 431 and a closed socket: such requests go on a
      // connection that is never reused.
      reset: headSize(path, headers) > LARGE_HEAD_BYTES,
    });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers)) {
      if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
    }
    return { status: res.statusCode, headers: out, bytes };
  }
  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }
}
