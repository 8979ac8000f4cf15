/** rclone's environment for an S3 gateway, with no config file of its own. */
export interface S3Endpoint {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

/** The environment for `rclone ... :s3:BUCKET/...` against `s3` (Ceph's RGW, path-style). */
export function rcloneEnv(s3: S3Endpoint): NodeJS.ProcessEnv {
  // An AWS_CA_BUNDLE in the environment makes rclone's S3 backend fail on a plain-http endpoint.
  const { AWS_CA_BUNDLE: _bundle, ...inherited } = process.env;
  return {
    ...inherited,
    RCLONE_CONFIG: '/dev/null',
    RCLONE_S3_PROVIDER: 'Ceph',
    RCLONE_S3_ENDPOINT: s3.endpoint,
    RCLONE_S3_ACCESS_KEY_ID: s3.accessKeyId,
    RCLONE_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    RCLONE_S3_REGION: s3.region,
    RCLONE_S3_FORCE_PATH_STYLE: 'true',
  };
}
