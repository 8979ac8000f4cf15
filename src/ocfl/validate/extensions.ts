/**
 * The extensions registered at github.com/OCFL/extensions (the docs/ folder, 2025): object and
 * root extension folders are named after them (W013, W016), and `ocfl_layout.json` names one of the
 * storage layouts among them (E071).
 */
export const STORAGE_LAYOUTS: readonly string[] = [
  '0002-flat-direct-storage-layout',
  '0003-hash-and-id-n-tuple-storage-layout',
  '0004-hashed-n-tuple-storage-layout',
  '0006-flat-omit-prefix-storage-layout',
  '0007-n-tuple-omit-prefix-storage-layout',
  '0010-differential-n-tuple-omit-prefix-storage-layout',
  '0011-direct-clean-path-layout',
  '0012-hash-and-no-prefix-id-n-tuple-storage-layout',
];

export const REGISTERED_EXTENSIONS: readonly string[] = [
  '0001-digest-algorithms',
  '0005-mutable-head',
  '0008-schema-registry',
  '0009-digest-algorithms',
  ...STORAGE_LAYOUTS,
];
