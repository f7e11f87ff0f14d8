/**
 * Fixed texts the agent loop puts into its requests and the scripted model recognises. They are plain
 * English, so a real model reads them as what they say.
 */

/** First line of the system block that describes the turn's environment (not the agent's instructions). */
export const ENVIRONMENT_HEADING = "# Your environment";

/** Starts the text block, beside the prompt, that names this turn's attachments. */
export const ATTACHMENTS_NOTE = "Attached files (in your working directory):";

/** The user message that asks for a compaction summary of the conversation before it. */
export const COMPACTION_REQUEST =
  "Summarize the conversation so far for your own future reference, keeping every fact, file name, " +
  "decision and code word I asked you to remember. Reply with the summary only.";

/** Starts the user message that replaces a compacted history. */
export const SUMMARY_MARKER = "[Summary of the earlier conversation]";
