/**
 * Validation step: bag-info.txt (package-info.txt before 0.96), optional; its entries go into the
 * report, and its Payload-Oxum is kept for `checkOxum`.
 */
import { readTagText, type BagContext } from './bag-context.js';
import { makeProblem, type BagProblem } from './problems.js';
import { parseTagText, tagValue } from './tagfile.js';

export interface BagInfo {
  /** The file read, if any. */
  fileName: string | undefined;
  /** Entries in order, labels as written. */
  entries: Array<[string, string]>;
  oxum: string | undefined;
  problems: BagProblem[];
}

export async function readBagInfo(bag: BagContext): Promise<BagInfo> {
  const fileName = bag.fileIndex.has('bag-info.txt')
    ? 'bag-info.txt'
    : bag.rules.packageInfo && bag.fileIndex.has('package-info.txt')
      ? 'package-info.txt'
      : undefined;
  const info: BagInfo = { fileName, entries: [], oxum: undefined, problems: [] };
  if (fileName === undefined) return info;
  const read = await readTagText(bag, fileName);
  info.problems.push(...read.problems);
  if (read.value === undefined) return info;
  const parsed = parseTagText(read.value);
  parsed.malformedLines.forEach((line) =>
    info.problems.push(makeProblem({ code: 'tag-file-malformed', path: fileName, line })),
  );
  if (bag.rules.spaceAfterColon)
    parsed.noSpaceLines.forEach((line) =>
      info.problems.push(makeProblem({ code: 'tag-line-no-space', path: fileName, line })),
    );
  info.entries = parsed.entries.map((e) => [e.label, e.value]);
  info.oxum = tagValue(parsed.entries, 'Payload-Oxum');
  const oxums = parsed.entries.filter((e) => e.label.toLowerCase() === 'payload-oxum').length;
  if (oxums > 1)
    info.problems.push(makeProblem({ code: 'payload-oxum-repeated', path: fileName, count: oxums }));
  return info;
}
