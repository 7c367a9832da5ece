/**
 * A size in the binary units the published limits are stated in (10 GB = 10 × 1024³ bytes, as src/monitor's D1 cap):
 * "1.4 TB", "286 GB", "16.2 GB". For the capacity model's messages and `npm run cli -- capacity`.
 */
export function byteSize(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const shown = value >= 100 || unit === 0 ? Math.round(value) : Number(value.toFixed(value >= 10 ? 1 : 2));
  return `${shown} ${units[unit]}`;
}
