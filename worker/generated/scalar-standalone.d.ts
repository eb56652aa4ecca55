// The module dev/build-reference.ts writes beside this file (on npm install); the script itself
// is the static asset dashboard/public/docs/scalar.js.
export const version: string;
/** A content hash of the script, for caching. */
export const etag: string;
