#!/usr/bin/env node
// `npm run openapi`: writes docs/openapi.json, the document the daemon serves at /v1/openapi.json
// with the default configuration, from the built server (dist/). test/http/openapi.test.ts checks
// that the file is current.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openapiDocument } from '../dist/src/http/offline.js';

const target = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'openapi.json');
writeFileSync(target, `${JSON.stringify(await openapiDocument(), null, 2)}\n`);
console.log(`wrote ${target}`);
