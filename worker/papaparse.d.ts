// The part of papaparse's API tern uses. @types/papaparse pulls in Node's global types, which
// would change the Worker's own (setTimeout's return type, for one).
declare module "papaparse" {
  interface ParseConfig {
    header?: boolean;
    /** Guessed from the first rows when not given. */
    delimiter?: string;
    preview?: number;
    skipEmptyLines?: boolean | "greedy";
    transformHeader?: (header: string, index: number) => string;
  }
  interface ParseResult<T> {
    data: T[];
    errors: { type: string; code: string; message: string; row?: number }[];
    meta: { fields?: string[]; delimiter: string };
  }
  const Papa: { parse<T>(input: string, config?: ParseConfig): ParseResult<T> };
  export default Papa;
}
