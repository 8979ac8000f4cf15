/**
 * Downloads: one stored file with Range and validators (`answerFile`), or a whole stored package
 * as a streamed, stored ZIP64-capable zip of known length (`answerZip`), each as a
 * `DownloadAnswer` value; `writeBody` puts a body on a node:http response. Routes resolve what
 * to send through the catalog; nothing here takes a path from a request or knows the web
 * framework.
 */
export type { DownloadAnswer } from './answer.js';
export { READ_CHUNK, StoredFileError, writeBody, type BodyOutcome, type BodySource } from './body.js';
export { answerFile, contentTypeFor, contentDisposition, digestField, parseRange } from './file.js';
export type { FileRequest, Offload, RangeRequest, StoredFile } from './file.js';
export { answerZip, type ZipSource } from './zip.js';
export { DownloadsInFlight } from './in-flight.js';
export { answerFromCopy, type OpenRange } from './from-copy.js';
export { planZip, type ZipEntryPlan, type ZipPlan } from './zip-records.js';
