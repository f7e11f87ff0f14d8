/** The keyset bounds of a page of rows, shared by both engines' transcript queries. */
import type { RowPage } from "./types.ts";

/** `seq > afterSeq LIMIT limit`; without a page, every row (seq starts at 0). */
export function pageParams(page: RowPage | undefined): [number, number] {
  return page === undefined ? [-1, Number.MAX_SAFE_INTEGER] : [page.afterSeq, page.limit];
}
