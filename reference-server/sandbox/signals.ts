/** Abort signals combined without AbortSignal.any, whose signals stay alive until their sources are collected. */

/** Both signals, as one: aborted when either is (no AbortSignal.any: its signals outlive the turn). */
export function anySignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (a.aborted) return a;
  if (b.aborted) return b;
  const controller = new AbortController();
  const abort = () => {
    controller.abort();
    a.removeEventListener("abort", abort);
    b.removeEventListener("abort", abort);
  };
  a.addEventListener("abort", abort, { once: true });
  b.addEventListener("abort", abort, { once: true });
  return controller.signal;
}
