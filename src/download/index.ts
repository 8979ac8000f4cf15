/**
 * Downloads: one stored file with Range and validators (`sendFile`), or a whole stored package
 * as a streamed, stored ZIP64-capable zip of known length (`sendZip`). Routes resolve what to send
 * through the catalog; nothing here takes a path from a request.
 */
export { READ_CHUNK, StoredFileError } from './body.js';
export { sendFile, contentTypeFor, contentDisposition, digestField, parseRange } from './file.js';
export type { Offload, RangeRequest, StoredFile } from './file.js';
export { sendZip, planZip } from './zip.js';
export type { ZipEntryPlan, ZipPlan, ZipSource } from './zip.js';
