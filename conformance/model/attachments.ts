/**
 * Attachments (Resources/Attachment; Endpoints/Send a message `metadata.attachments`; Limits): the legal shapes a
 * send may carry, and what the API promises of them that a send's answer shows — malformed entries and anything
 * past the caps are dropped silently, never refused.
 */
import { defineRules } from "./rules.ts";

export const attachmentRules = defineRules("attachments", {
  droppedSilently: {
    section: "Endpoints/Send a message",
    check: "SEND-ATTACHMENT-MALFORMED-DROPPED",
    text: "Malformed attachment entries are dropped silently: the turn runs (200), never a refusal",
  },
  accepted: {
    section: "Resources/Attachment",
    check: "SEND-ATTACHMENT-READ",
    text: "A turn with well-formed attachments within the caps runs (200), an explicit empty list (the default) too",
  },
  read: {
    section: "Endpoints/Send a message",
    check: "SEND-ATTACHMENT-READ",
    text: "Each attachment is written to `.uploads/<name>` and announced to the agent: a turn asked to read it answers with its contents, on every agent kind, key, route, depth and input shape",
  },
});

/** The file the "one" shape attaches, and the text it holds: a turn asked to read it must answer with that. */
export function attachedFile(nonce: string): { name: string; text: string } {
  return { name: `note-${nonce}.txt`, text: `attached ${nonce}` };
}

export type AttachmentShape = "one" | "same-name-twice" | "unsafe-name" | "malformed" | "empty";

/** The `metadata.attachments` value of each shape: small files, so a replayed request stays readable. */
export function attachmentsOf(shape: AttachmentShape, nonce: string): unknown[] {
  const file = (name: string, text: string) => ({
    name,
    mediaType: "text/plain",
    dataBase64: Buffer.from(text).toString("base64"),
  });
  switch (shape) {
    case "one": {
      const one = attachedFile(nonce);
      return [file(one.name, one.text)];
    }
    case "same-name-twice":
      return [file("same.txt", `first ${nonce}`), file("same.txt", `second ${nonce}`)];
    case "unsafe-name":
      return [file(`../../etc/${nonce}.txt`, `outside ${nonce}`)];
    case "empty":
      // The default, sent explicitly: a turn like one without attachments.
      return [];
    case "malformed":
      return [
        { name: `bad-${nonce}.txt`, mediaType: "text/plain", dataBase64: "data:text/plain;base64,!!" },
        42,
      ];
  }
}

export const ATTACHMENT_SHAPES: AttachmentShape[] = [
  "one",
  "same-name-twice",
  "unsafe-name",
  "malformed",
  "empty",
];
