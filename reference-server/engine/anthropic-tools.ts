/** The sandbox tools as the Messages API sees them: names and JSON schemas of their inputs. */
import type Anthropic from "@anthropic-ai/sdk";
import type { ToolName } from "../sandbox/types.ts";

export const TOOL_DEFINITIONS: Anthropic.Messages.Tool[] = [
  {
    name: "write_file",
    description: "Create or overwrite a file in your working directory.",
    input_schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "Path relative to the working directory." },
        content: { type: "string", description: "The file's full new content." },
      },
      required: ["path", "content"],
    },
  },
  {
    name: "read_file",
    description: "Read a file from your working directory (attachments are under .uploads/).",
    input_schema: {
      type: "object",
      properties: { path: { type: "string", description: "Path relative to the working directory." } },
      required: ["path"],
    },
  },
  {
    name: "list_files",
    description: "List the files in your working directory, or in a folder of it.",
    input_schema: {
      type: "object",
      properties: { path: { type: "string", description: "Folder relative to the working directory." } },
    },
  },
  {
    name: "run_command",
    description: "Run a shell command in your working directory and return its output.",
    input_schema: {
      type: "object",
      properties: { command: { type: "string", description: "The command line, run by sh -c." } },
      required: ["command"],
    },
  },
];

const TOOL_NAMES: ReadonlySet<string> = new Set(TOOL_DEFINITIONS.map((t) => t.name));

export function isToolName(name: string): name is ToolName {
  return TOOL_NAMES.has(name);
}
