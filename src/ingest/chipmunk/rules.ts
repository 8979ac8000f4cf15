/** What the chipmunk checks are given: the request the bag must match, and its content type's rules. */

export interface ContentTypeRules {
  /** Path to a chipmunk bag-info profile JSON (relative paths resolve against the working directory). */
  profile?: string | undefined;
  /** Argument vector; placeholders `{external_id}` and `{bag}` (absolute bag directory). */
  validator?: string[] | undefined;
  timeoutMs?: number | undefined;
}

export interface ExpectedRequest {
  bagId: string;
  externalId: string;
  contentType: string;
}
