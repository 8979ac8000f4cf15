/**
 * What a download answers, as a value: the status, the headers and where the body comes from.
 * The HTTP layer (`http/send-download.ts`) turns it into a response; nothing in `download/`
 * knows the web framework.
 */
import type { BodySource } from './body.js';

export type DownloadAnswer =
  /** Status, headers and a body of exactly `length` bytes from `source` (the caller must close it if it does not send it). */
  | {
      kind: 'body';
      status: 200 | 206;
      headers: Record<string, string>;
      length: number;
      source: BodySource;
      context: Record<string, unknown>;
    }
  /** Status and headers, no body: HEAD (the headers describe the body GET would send), or 304. */
  | { kind: 'headers'; status: 200 | 206 | 304; headers: Record<string, string> }
  /** A front proxy sends the body (X-Sendfile, X-Accel-Redirect); our Content-Length is dropped. */
  | { kind: 'offload'; headers: Record<string, string> }
  /** The request cannot be answered with the file: 416, or 500 when the stored file does not match the catalog. */
  | {
      kind: 'error';
      status: 416 | 500;
      headers: Record<string, string>;
      message: string;
      cause?: unknown;
      context: Record<string, unknown>;
    };
