/**
 * Where the Library of Congress BagIt conformance suite sits (a copy in test/fixtures/, byte for
 * byte: .gitattributes keeps git from touching line endings), and the list of its cases. Tests run from dist/test/..., so the repository root is
 * found from this file's location, never from the working directory.
 */
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: this file is test/helpers/ in the sources and dist/test/helpers/ when built. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      if (statSync(join(dir, 'package.json')).isFile()) return dir;
    } catch {
      // keep climbing
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('package.json not found above the test helpers');
    dir = parent;
  }
}

const SUITE_ROOT = resolve(repoRoot(), 'test/fixtures/bagit-conformance-suite');

type SuiteCategory = 'valid' | 'invalid' | 'warning' | 'linux-only' | 'windows-only';

export interface SuiteCase {
  /** `v0.97/invalid/bom-in-bagit.txt` */
  id: string;
  version: string;
  category: SuiteCategory;
  dir: string;
}

/** Every case: each directory `v<version>/<category>/<case>/` (loose files such as Makefiles are skipped). */
export function suiteCases(): SuiteCase[] {
  const cases: SuiteCase[] = [];
  for (const v of readdirSync(SUITE_ROOT).sort()) {
    const vDir = join(SUITE_ROOT, v);
    if (!v.startsWith('v') || !statSync(vDir).isDirectory()) continue;
    for (const category of readdirSync(vDir).sort()) {
      const cDir = join(vDir, category);
      if (!statSync(cDir).isDirectory()) continue;
      for (const name of readdirSync(cDir).sort()) {
        const dir = join(cDir, name);
        if (!statSync(dir).isDirectory()) continue;
        cases.push({
          id: `${v}/${category}/${name}`,
          version: v.slice(1),
          category: category as SuiteCategory,
          dir,
        });
      }
    }
  }
  return cases;
}
