// The module dev/build-reference.ts writes beside this file (on npm install).
/** @scalar/api-reference's standalone browser script. */
declare const script: string;
export default script;
export const version: string;
/** A content hash of the script, for caching. */
export const etag: string;
