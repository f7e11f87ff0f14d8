/**
 * Flag parsing shared by the server-side commands (`serve`, `model`): a bad value is commander's usage error
 * (exit 2) with the parser's message, and `parseCommand` turns it into one line on stderr.
 */
import { type Command, CommanderError } from "commander";

/** A flag parser whose failure becomes `<command>.usage` with the parser's own message. */
export function usage<T>(command: string, parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      throw new CommanderError(2, `${command}.usage`, (error as Error).message);
    }
  };
}

/** A whole-number flag. */
export function integer(command: string, name: string): (value: string) => number {
  return usage(command, (value) => {
    if (!/^\d+$/.test(value)) throw new Error(`${name} must be a whole number, got ${value}`);
    return Number(value);
  });
}

/** Parses `args`; null when they are fine, else the exit code (0 for --help, 2 for bad usage). */
export function parseCommand(program: Command, args: string[], command: string): number | null {
  try {
    program.parse(args, { from: "user" });
    return null;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === `${command}.usage`) process.stderr.write(`agent-api ${command}: ${error.message}\n`);
      return error.exitCode === 0 ? 0 : 2;
    }
    throw error;
  }
}
