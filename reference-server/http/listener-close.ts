/**
 * The first step of a drain: stop taking connections without dropping a request already on its way. A
 * balancer that connected just before the listener closed has sent, or is sending, its request on a
 * connection the server accepted but has not read yet; Node's `close()` destroys such a connection as idle,
 * and the balancer sees a reset after sending, which nginx does not resend for a POST (a 502 for the
 * client). So the listener is closed on its own first, and each connection accepted by then may bring its
 * first request (served as any other) before the rest of the close runs.
 */
import type { Server } from "node:http";
import { Server as NetServer, type Socket } from "node:net";

export interface ListenerClose {
  /** Closes the listener, then waits (up to `maxWaitMs`) for accepted connections to bring their request. */
  closeListener(maxWaitMs: number): Promise<void>;
}

export function trackListener(server: Server): ListenerClose {
  // Connections that have not carried a request yet.
  const fresh = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    fresh.add(socket);
    socket.once("close", () => fresh.delete(socket));
  });
  server.on("request", (request: { socket: Socket }) => fresh.delete(request.socket));
  return {
    async closeListener(maxWaitMs) {
      // In the check phase right after a poll: the connections the kernel had queued are accepted by then,
      // so closing the listener resets as few as can be (those that arrive in this very instant).
      await new Promise((resolve) => setImmediate(resolve));
      // net's close, not http's: http's also destroys the connections without a request, fresh ones included.
      if (server.listening) NetServer.prototype.close.call(server);
      const deadline = performance.now() + maxWaitMs;
      while (fresh.size > 0 && performance.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
    },
  };
}
