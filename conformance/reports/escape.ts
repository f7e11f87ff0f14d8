/**
 * Escaping shared by the JUnit and HTML reports. Evidence comes from the deployment under test (SSE
 * frames, bodies, header values), so it may hold markup, `]]>`, or bytes that XML 1.0 forbids.
 */

/**
 * Characters XML 1.0 does not allow anywhere, not even as `&#n;`: C0 controls other than tab, LF and CR,
 * unpaired surrogates (the `u` flag makes the range match only unpaired halves), U+FFFE and U+FFFF.
 * HTML treats the same characters as parse errors, so both reports use this.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const ILLEGAL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/gu;

/**
 * Replaces characters illegal in XML 1.0 with U+FFFD rather than dropping them, so a reader of the
 * evidence still sees that something was there.
 */
export function legalText(text: string): string {
  return text.replace(ILLEGAL, "\uFFFD");
}

/**
 * Escapes text for XML or HTML element content and double- or single-quoted attribute values. Tab, LF and
 * CR become character references so attribute values keep them (parsers normalize raw ones to spaces).
 */
export function escapeMarkup(text: string): string {
  return legalText(text).replace(/[&<>"'\t\n\r]/g, (c) => ENTITIES[c]);
}

/** Element content only: keeps line breaks raw so `<pre>` and CDATA-free XML text stay readable. */
export function escapeText(text: string): string {
  return legalText(text).replace(/[&<>]/g, (c) => ENTITIES[c]);
}

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "\t": "&#9;",
  "\n": "&#10;",
  "\r": "&#13;",
};
