/** The digest algorithms fixity computes, as BagIt names them (RFC 8493 §2.4, lower-case as in file names). */
export type Algorithm = 'md5' | 'sha1' | 'sha224' | 'sha256' | 'sha384' | 'sha512';

export const ALGORITHMS: readonly Algorithm[] = ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'];

/** Strongest first: the order audits pick "the strongest recorded digest" by. */
export const ALGORITHM_STRENGTH: readonly Algorithm[] = [
  'sha512',
  'sha384',
  'sha256',
  'sha224',
  'sha1',
  'md5',
];

/** Hex digits of each algorithm's digest. */
export const DIGEST_LENGTH: Readonly<Record<Algorithm, number>> = {
  md5: 32,
  sha1: 40,
  sha224: 56,
  sha256: 64,
  sha384: 96,
  sha512: 128,
};
