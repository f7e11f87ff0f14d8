/**
 * The X-Conversation-Id header value: the id itself when it is printable ASCII without \`%\` and without
 * leading or trailing spaces (which HTTP would strip), else the id percent-encoded as UTF-8. Percent-decoding
 * the value therefore always gives the id back, and ids of printable ASCII travel as they are.
 */
export function conversationIdHeader(id: string): string {
  return /^[\x21-\x24\x26-\x7e](?:[\x20-\x24\x26-\x7e]*[\x21-\x24\x26-\x7e])?$/.test(id)
    ? id
    : encodeURIComponent(id);
}
