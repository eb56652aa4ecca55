// Sizes and counts as people read them ("12.3 MB", "10,000"), shared by the Images page and the
// editor's picker (which bundles this file, so it imports nothing).

/** 512 bytes, 48 KB, 12.3 MB, 500 MB: a decimal only where it says something. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${Math.round(n / 1024)} KB`;
  const mb = n / 1048576;
  return `${mb >= 100 || Number.isInteger(mb) ? Math.round(mb) : mb.toFixed(1)} MB`;
}

export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}
