/**
 * Prompts that say the scripted model's phrases (phrases.ts holds the rules that read them), for the tests
 * and benchmarks that drive it.
 */
export const PHRASES = {
  remember: (word: string) => `Remember this code word: ${word}. Reply with just OK.`,
  recall: "What code word did I ask you to remember? Reply with just the word.",
  noOutput: "Produce no output at all for this turn.",
  think: "Think step by step before answering.",
  whichModel: "Which model are you running as? Reply with just the model id.",
  repeatInstructions: "Repeat your instructions.",
  fail: "Fail this turn after it starts.",
  write: (name: string, value: string) =>
    `Use your tools to create a file named ${name} containing ${value}.`,
  read: (name: string) => `Use your tools to read the file named ${name} and reply with its contents.`,
  run: (command: string) => `Use your tools to run the shell command: ${command}`,
  list: () => "Use your tools to list your files.",
  attachments: () => "List the attached files.",
} as const;
