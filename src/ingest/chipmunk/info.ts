/**
 * chipmunk-info.txt: its identity tags must match the request, and its Metadata-* tags come all
 * or none and name a tag file of the bag.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  decodeTagBytes,
  isPayloadPath,
  makeProblem,
  parseTagText,
  tagValue,
  unsafePathReason,
  type BagProblemInit,
  type BagReport,
} from '../../bagit/index.js';
import type { StoredProblem } from '../../catalog/types.js';
import {
  CHIPMUNK_INFO,
  chipmunkProblem,
  errorDetail,
  IDENTITY_TAGS,
  METADATA_TAGS,
  type ChipmunkProblemInit,
  type IdentityTag,
} from './problems.js';
import type { ExpectedRequest } from './rules.js';

/** Read chipmunk-info.txt in the bag's tag-file encoding; undefined when the bag has none. */
export async function readChipmunkInfo(
  bagDir: string,
  report: BagReport,
  problems: StoredProblem[],
): Promise<Map<string, string> | undefined> {
  if (!report.files.some((f) => f.path === CHIPMUNK_INFO)) return undefined;
  let bytes: Buffer;
  try {
    bytes = await readFile(join(bagDir, CHIPMUNK_INFO));
  } catch (err) {
    problems.push(makeProblem({ code: 'file-unreadable', path: CHIPMUNK_INFO, detail: errorDetail(err) }));
    return new Map();
  }
  const encoding =
    report.encoding !== undefined && decodeTagBytes(new Uint8Array(0), report.encoding).ok
      ? report.encoding
      : 'UTF-8';
  const decoded = decodeTagBytes(bytes, encoding);
  if (!decoded.ok) {
    problems.push(makeProblem({ code: 'tag-file-undecodable', path: CHIPMUNK_INFO, encoding }));
    return new Map();
  }
  const parsed = parseTagText(decoded.text.replace(/^\ufeff/, ''));
  parsed.malformedLines.forEach((line) =>
    problems.push(makeProblem({ code: 'tag-file-malformed', path: CHIPMUNK_INFO, line })),
  );
  const tags = new Map<string, string>();
  for (const tag of [...IDENTITY_TAGS, ...METADATA_TAGS]) {
    const value = tagValue(parsed.entries, tag);
    if (value !== undefined) tags.set(tag, value);
  }
  return tags;
}

export function checkChipmunkInfo(
  tags: Map<string, string> | undefined,
  expected: ExpectedRequest,
  report: BagReport,
): StoredProblem[] {
  const problems: StoredProblem[] = [];
  const wanted: Record<IdentityTag, string> = {
    'External-Identifier': expected.externalId,
    'Bag-ID': expected.bagId,
    'Chipmunk-Content-Type': expected.contentType,
  };
  for (const tag of IDENTITY_TAGS) {
    const actual = tags?.get(tag);
    // A bag_id is a UUID, compared case-insensitively (API.md); the others are exact.
    const same =
      actual !== undefined &&
      (tag === 'Bag-ID' ? actual.toLowerCase() === wanted[tag].toLowerCase() : actual === wanted[tag]);
    if (same) continue;
    const init: ChipmunkProblemInit = {
      code: 'chipmunk-info-mismatch',
      path: CHIPMUNK_INFO,
      tag,
      expected: wanted[tag],
      fileMissing: tags === undefined,
    };
    if (actual !== undefined) init.actual = actual;
    problems.push(chipmunkProblem(init));
  }
  if (tags === undefined) return problems;

  const present = METADATA_TAGS.filter((t) => tags.has(t));
  if (present.length > 0 && present.length < METADATA_TAGS.length) {
    const missing = METADATA_TAGS.filter((t) => !tags.has(t));
    problems.push(
      chipmunkProblem({ code: 'chipmunk-metadata-incomplete', path: CHIPMUNK_INFO, present, missing }),
    );
  }
  const tagfile = tags.get('Metadata-Tagfile');
  if (tagfile !== undefined) {
    const unsafe = unsafePathReason(tagfile);
    if (unsafe !== undefined) {
      problems.push(
        makeProblem({
          code: 'unsafe-path',
          path: tagfile,
          listedIn: CHIPMUNK_INFO,
          reason: unsafe,
        } satisfies BagProblemInit),
      );
    } else if (isPayloadPath(tagfile) || !report.files.some((f) => f.path === tagfile)) {
      problems.push(
        chipmunkProblem({
          code: 'chipmunk-metadata-tagfile-missing',
          path: tagfile,
          inPayload: isPayloadPath(tagfile),
        }),
      );
    }
  }
  return problems;
}
