/**
 * Reports may go to standard output (`--junit /dev/stdout`, `--json -`) for a pipe or a CI step that reads
 * them there; the console report then goes to standard error, so what is piped is the report alone.
 */

/** The names of standard output a report flag may be given. */
const STANDARD_OUTPUT_NAMES: ReadonlySet<string> = new Set([
  "-",
  "/dev/stdout",
  "/dev/fd/1",
  "/proc/self/fd/1",
]);

export function isStandardOutput(file: string): boolean {
  return STANDARD_OUTPUT_NAMES.has(file);
}

/** Writes to standard output and resolves once it is handed on (a report of megabytes into a pipe). */
export function writeStandardOutput(text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (error) => (error ? reject(error) : resolve()));
  });
}
