/** How a number of bytes is written for people: by the CLI, in the log and on the pages. */

/** 1.07 GB, 640.0 MB, 12.0 kB, 512 B: decimal units, as MB/s is and as disks are sold. */
export function formatBytes(n: number): string {
  if (n >= 1e15) return `${(n / 1e15).toFixed(2)} PB`;
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)} TB`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}
