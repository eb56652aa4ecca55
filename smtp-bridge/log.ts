// Structured logs: one JSON object a line on stdout, for journald, Docker or any collector.
// Callers pass facts (session id, address, sizes, outcomes), never an API key, a password or
// message content; a key is named by its fingerprint (see auth.ts).
export type Level = "debug" | "info" | "warn" | "error";
export type Fields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  debug(event: string, fields?: Fields): void;
  info(event: string, fields?: Fields): void;
  warn(event: string, fields?: Fields): void;
  error(event: string, fields?: Fields): void;
}

const RANK: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(min: Level, write: (line: string) => void = (l) => process.stdout.write(l + "\n")): Logger {
  const at = (level: Level) => (event: string, fields: Fields = {}) => {
    if (RANK[level] < RANK[min]) return;
    write(JSON.stringify({ time: new Date().toISOString(), level, event, ...fields }));
  };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A logger that drops everything (tests that only need the behaviour). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
