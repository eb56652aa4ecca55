// The part of papaparse's API tern uses. @types/papaparse pulls in Node's global types, which
// would change the Worker's own (setTimeout's return type, for one).
declare module "papaparse" {
  interface ParseMeta {
    fields?: string[];
    delimiter: string;
    /** The line break, guessed from the input when not given. */
    linebreak: string;
    /** With `step`: where the row just parsed ends (after its line break), in characters. */
    cursor: number;
    aborted: boolean;
  }
  interface ParseResult<T> {
    data: T[];
    errors: { type: string; code: string; message: string; row?: number }[];
    meta: ParseMeta;
  }
  interface StepResult<T> {
    data: T;
    errors: ParseResult<T>["errors"];
    meta: ParseMeta;
  }
  interface ParseConfig<T> {
    header?: boolean;
    /** Guessed from the first rows when not given. */
    delimiter?: string;
    newline?: string;
    preview?: number;
    skipEmptyLines?: boolean | "greedy";
    transformHeader?: (header: string, index: number) => string;
    /** Each row as it is parsed, instead of all of them in the result. */
    step?: (row: StepResult<T>, parser: { abort(): void }) => void;
  }
  const Papa: { parse<T>(input: string, config?: ParseConfig<T>): ParseResult<T> };
  export default Papa;
}
