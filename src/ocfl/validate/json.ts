/** The JSON shapes the checks test before they trust a value, and the URI test OCFL's SHOULDs use. */
export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A scheme and something after its colon: what W005 and W009 ask of ids and addresses. */
export const isUri = (s: string): boolean => /^[a-z][a-z0-9+.-]*:.+/i.test(s);
