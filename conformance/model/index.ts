/**
 * The API as an executable model: one module per resource, each rule carrying its API section and the named
 * check that owns it. The explorer (conformance/explorer/) drives a deployment and compares every answer with it.
 */
import { accessRules } from "./access.ts";
import { attachmentRules } from "./attachments.ts";
import { deleteRules } from "./deletes.ts";
import { fieldRules } from "./fields.ts";
import { forkRules } from "./forks.ts";
import { idRules } from "./ids.ts";
import { listRules } from "./lists.ts";
import { memoryRules } from "./memory.ts";
import type { ModelRule } from "./rules.ts";
import { sendRules } from "./send-flags.ts";
import { sharingRules } from "./sharing.ts";
import { streamRules } from "./stream.ts";
import { transcriptRules } from "./transcripts.ts";
import { turnMeaningRules } from "./turn-meaning.ts";
import { visibilityRules } from "./visibility.ts";

export type { ModelRule };

/** Every rule of the model, resource by resource. */
export const modelRules: ModelRule[] = [
  accessRules,
  attachmentRules,
  visibilityRules,
  idRules,
  sharingRules,
  forkRules,
  deleteRules,
  fieldRules,
  transcriptRules,
  listRules,
  sendRules,
  streamRules,
  turnMeaningRules,
  memoryRules,
].flatMap((group) => Object.values(group));
