/** An explicit outcome: a value, or a failure described by `E` (by default a message). */
export type Result<T, E = { message: string }> = { ok: true; value: T } | ({ ok: false } & E);
