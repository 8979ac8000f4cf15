/**
 * The rules that differ between BagIt versions (0.93 to 1.0), read once from bagit.txt's version
 * and consulted by the validation steps.
 */
import type { Severity } from './problems.js';
import { compareVersions, SUPPORTED_VERSIONS } from './tagfile.js';

export interface VersionRules {
  /** `%25` is an escape (1.0); before, only `%0D` and `%0A` are. */
  decodePercent: boolean;
  /** The same path listed twice with the same digest: a warning before 1.0, an error from 1.0. */
  duplicateSeverity: Severity;
  /** 1.0: every payload file in every payload manifest; before, in at least one. */
  everyPayloadManifest: boolean;
  /** 0.93 to 0.95 called bag-info.txt package-info.txt. */
  packageInfo: boolean;
  /** 1.0 writes `Label: value`, one space after the colon; a line without it is a warning. */
  spaceAfterColon: boolean;
  /** RFC 8493 §2.2.1's MUSTs for tag manifests (list every payload manifest, no tag manifest): errors from 1.0. */
  tagManifestRules: Severity;
}

/**
 * A bag whose version cannot be read or is unknown is held to the current rules (1.0): the
 * strictest reading, and the one a new bag should follow anyway.
 */
export function rulesFor(version: string | undefined): VersionRules {
  const known =
    version !== undefined &&
    /^\d+\.\d+$/.test(version) &&
    SUPPORTED_VERSIONS.some((v) => compareVersions(v, version) === 0);
  const effective = known ? version : '1.0';
  const atLeast10 = compareVersions(effective, '1.0') >= 0;
  return {
    decodePercent: atLeast10,
    duplicateSeverity: atLeast10 ? 'error' : 'warning',
    everyPayloadManifest: atLeast10,
    packageInfo: compareVersions(effective, '0.96') < 0,
    spaceAfterColon: atLeast10,
    tagManifestRules: atLeast10 ? 'error' : 'warning',
  };
}
