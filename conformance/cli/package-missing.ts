/**
 * Whether an import failed because package `pkg` is not installed, rather than for a module missing inside
 * it: the commands that need @agent-api/reference-server say to install it only in the first case.
 */
export function isPackageMissing(error: unknown, pkg: string): boolean {
  return (
    (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" &&
    String((error as Error).message).includes(`'${pkg}'`)
  );
}
