/** What the chipmunk checks are given: the request the bag must match, and its content type's rules. */
import type { ContentTypeConfig } from '../../config/config.js';

/** The content type's profile, external validator and its time limit, as configured. */
export type ContentTypeRules = ContentTypeConfig;

export interface ExpectedRequest {
  bagId: string;
  externalId: string;
  contentType: string;
}
