/**
 * Preloaded into a server's process (`NODE_OPTIONS=--import=.../shifted-clock.ts`) to give it a clock
 * AGENT_API_TEST_CLOCK_OFFSET_MS off this machine's: every `Date.now()` and `new Date()` there reads the
 * shifted time, as on a host whose clock is set wrong.
 */
const offset = Number(process.env.AGENT_API_TEST_CLOCK_OFFSET_MS ?? "0");
const RealDate = Date;

class ShiftedDate extends RealDate {
  // biome-ignore lint/suspicious/noExplicitAny: Date's constructor overloads cannot be spread typed.
  constructor(...args: any[]) {
    if (args.length === 0) super(RealDate.now() + offset);
    // @ts-expect-error: forwarded as given, as Date's own overloads read them.
    else super(...args);
  }

  static override now(): number {
    return RealDate.now() + offset;
  }
}

if (offset !== 0) globalThis.Date = ShiftedDate as DateConstructor;
