/**
 * The random sample's score as markdown: each pair's verdict, then caught-of-applied by rule, by condition and
 * by dimension. A pair that never fired is listed as not applied and left out of every score.
 */

export interface PairVerdict {
  rule: string;
  condition: string;
  dimension: string;
  /** Times the fault fired during the run. */
  fired: number;
  caught: boolean;
  /** The MUST failures that counted. */
  caughtBy: string[];
}

function tally(verdicts: PairVerdict[], key: (v: PairVerdict) => string): string[] {
  const groups = new Map<string, PairVerdict[]>();
  for (const v of verdicts) groups.set(key(v), [...(groups.get(key(v)) ?? []), v]);
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, of]) => {
      const applied = of.filter((v) => v.fired > 0);
      const caught = applied.filter((v) => v.caught).length;
      const skipped = of.length - applied.length;
      return `| ${name} | ${caught} | ${applied.length} |${skipped ? ` ${skipped}` : " 0"} |`;
    });
}

export function scoreTables(verdicts: PairVerdict[]): string {
  const applied = verdicts.filter((v) => v.fired > 0);
  const caught = applied.filter((v) => v.caught).length;
  const pct = applied.length === 0 ? 100 : Math.round((caught / applied.length) * 1000) / 10;
  const lines = [
    "| rule | condition | fired | caught | MUST failures counted |",
    "| --- | --- | --- | --- | --- |",
    ...verdicts.map(
      (v) =>
        `| ${v.rule} | ${v.condition} | ${v.fired} | ${v.fired === 0 ? "not applied" : v.caught ? "yes" : "**no**"} | ${v.caughtBy.slice(0, 4).join(", ")}${v.caughtBy.length > 4 ? ", …" : ""} |`,
    ),
    "",
    `**Score: ${caught} of ${applied.length} applied pairs caught (${pct}%)**; ${verdicts.length - applied.length} not applied`,
    "",
    "| rule | caught | applied | not applied |",
    "| --- | --- | --- | --- |",
    ...tally(verdicts, (v) => v.rule),
    "",
    "| condition | caught | applied | not applied |",
    "| --- | --- | --- | --- |",
    ...tally(verdicts, (v) => v.condition),
    "",
    "| dimension | caught | applied | not applied |",
    "| --- | --- | --- | --- |",
    ...tally(verdicts, (v) => v.dimension),
  ];
  return lines.join("\n");
}
