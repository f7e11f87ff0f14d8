/**
 * Each workspace's share of the disk: what its conversations hold (transcripts, histories, forks, in the store;
 * working files, clones and published outputs on this instance's disk) may not pass `bytesPerWorkspace`.
 * A write of a workspace at its share (a turn, a fork) is refused with 429 before anything is written; its
 * reads and deletes still work, and no other workspace's writes are touched.
 *
 * Usage is measured (the store's sums, one `find` over the workspace's local directories) when first needed,
 * again once it is older than `maxAgeMs`, and sooner (after `minRemeasureMs`) once a write of the workspace
 * finished, since a turn's output and files are known only then. Between measurements each admitted write is
 * charged what it is known to add (a fork: the parent's bytes; a turn: its prompt), so writes in quick
 * succession cannot pass the share between two measurements. Several instances each charge their own writes
 * and see the others' at their next measurement.
 */
import { overCap } from "../errors/catalogue.ts";
import type { SandboxManager } from "../sandbox/types.ts";
import type { Store } from "../store/types.ts";

/** 4 GiB: the kit's heaviest legitimate runs (`agent-api check` on the demo, test:postgres) use far less. */
export const DEFAULT_DISK_BYTES_PER_WORKSPACE = 4 * 1024 * 1024 * 1024;

export interface DiskShareOptions {
  bytesPerWorkspace: number;
  /** A measurement older than this is taken again before the next write (default 60 s). */
  maxAgeMs?: number;
  /** After a write finished, measure again before the next one once this much passed (default 2 s). */
  minRemeasureMs?: number;
}

/** What a refused write waits for: the next measurement may find room (another instance's delete). */
const RETRY_AFTER_SECONDS = 30;

interface Usage {
  measured: number;
  measuredAt: number;
  /** Bytes of writes admitted and finished since the measurement began. */
  charged: number;
  /** Bytes of writes admitted and still running. */
  reserved: number;
  /** A write finished since the measurement: what it added is known only to a new one. */
  stale: boolean;
  measuring?: Promise<void>;
}

/** An admitted write's bytes: `done` once it is over (what it added is then charged, or given back). */
export interface DiskReservation {
  done(written: boolean): void;
}

export class DiskShares {
  readonly #store: Store;
  readonly #sandbox: SandboxManager;
  readonly #share: number;
  readonly #maxAgeMs: number;
  readonly #minRemeasureMs: number;
  readonly #usage = new Map<string, Usage>();

  constructor(store: Store, sandbox: SandboxManager, options: DiskShareOptions) {
    this.#store = store;
    this.#sandbox = sandbox;
    this.#share = options.bytesPerWorkspace;
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#minRemeasureMs = options.minRemeasureMs ?? 2_000;
  }

  get bytesPerWorkspace(): number {
    return this.#share;
  }

  /** The bytes a fork of this conversation copies: its rows and its local files. */
  async forkBytes(conversationId: string): Promise<number> {
    const [stored, local] = await Promise.all([
      this.#store.storedBytes.ofConversation(conversationId),
      this.#sandbox.localBytes([conversationId]),
    ]);
    return stored + local;
  }

  /** The workspace's usage as last measured plus what was admitted since (measuring first when due). */
  async usage(workspaceId: string): Promise<number> {
    const usage = await this.#current(workspaceId);
    return usage.measured + usage.charged + usage.reserved;
  }

  /**
   * Admits a write of `bytes` (at least its prompt) for the workspace, or throws 429 when its usage with them
   * would pass its share. Nothing is admitted past the share, whatever the size: a turn at a full share is
   * refused even if it would write little, since what a turn writes is known only once it ran.
   */
  async reserve(workspaceId: string, bytes: number): Promise<DiskReservation> {
    const usage = await this.#current(workspaceId);
    const used = usage.measured + usage.charged + usage.reserved;
    if (used >= this.#share || used + bytes > this.#share) {
      throw overCap(
        "workspace",
        `This workspace's disk share is full (${formatBytes(used)} of ${formatBytes(this.#share)}, this write adds ${formatBytes(bytes)}): delete conversations it no longer needs to write again`,
        RETRY_AFTER_SECONDS,
      );
    }
    usage.reserved += bytes;
    let settled = false;
    return {
      done: (written) => {
        if (settled) return;
        settled = true;
        usage.reserved -= bytes;
        if (written) usage.charged += bytes;
        usage.stale = true;
      },
    };
  }

  /** The workspace's usage changed by more than was charged (a delete): measure anew before its next write. */
  forget(workspaceId: string): void {
    this.#usage.delete(workspaceId);
  }

  async #current(workspaceId: string): Promise<Usage> {
    let usage = this.#usage.get(workspaceId);
    if (usage === undefined) {
      usage = { measured: 0, measuredAt: Number.NEGATIVE_INFINITY, charged: 0, reserved: 0, stale: true };
      this.#usage.set(workspaceId, usage);
    }
    const age = Date.now() - usage.measuredAt;
    if (age >= this.#maxAgeMs || (usage.stale && age >= this.#minRemeasureMs))
      await this.#measure(workspaceId, usage);
    return usage;
  }

  /** One measurement at a time per workspace; writes arriving meanwhile wait for it and share it. */
  #measure(workspaceId: string, usage: Usage): Promise<void> {
    usage.measuring ??= (async () => {
      const chargedBefore = usage.charged;
      usage.stale = false;
      try {
        const stored = await this.#store.storedBytes.ofWorkspace(workspaceId);
        const local = await this.#sandbox.localBytes(stored.conversationIds, workspaceId);
        usage.measured = stored.bytes + local;
        // What was charged before the walk began is in the measurement now; what came later may not be.
        usage.charged -= chargedBefore;
        usage.measuredAt = Date.now();
      } finally {
        usage.measuring = undefined;
      }
    })();
    return usage.measuring;
  }
}

function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return "more than can be measured";
  const MiB = 1024 * 1024;
  return bytes >= MiB ? `${(bytes / MiB).toFixed(1)} MiB` : `${bytes} bytes`;
}
