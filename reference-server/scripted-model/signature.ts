/** Thinking-block signatures: stable for the same thinking text, so a scripted turn is reproducible. */
import { createHmac } from "node:crypto";

export const DEFAULT_SIGNATURE_SECRET = "agent-api-scripted-engine";

export function signThinking(thinking: string, secret: string = DEFAULT_SIGNATURE_SECRET): string {
  return createHmac("sha256", secret).update(thinking).digest("base64");
}
